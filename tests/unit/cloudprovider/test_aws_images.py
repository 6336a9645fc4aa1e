"""Which instance types a Provisioner's amiFamily can boot: the rest is not offered, with a reason."""

import pytest

from provisioner.api.types import AWSProvider, Provisioner, ProvisionerSpec
from provisioner.cloudprovider.aws.amifamily import (
    AMI_FAMILIES,
    MissingImage,
    has_image,
    offered_instance_types,
    split_by_image,
)
from provisioner.cloudprovider.aws.amis import parameter_name
from provisioner.cloudprovider.aws.catalog import NodeConfiguration
from provisioner.cloudprovider.fake import make_instance_type
from provisioner.cloudprovider.types import ConfigurationError

NEURON = "aws.amazon.com/neuron"
CATALOG = [
    make_instance_type("g5g.xlarge", arch="arm64", gpus=1),
    make_instance_type("m6g.large", arch="arm64"),
    make_instance_type("g4dn.xlarge", gpus=1),
    make_instance_type("g5g.4xlarge", arch="arm64", gpus=1),
    make_instance_type("inf2.xlarge", gpus=1, gpu_resource=NEURON),
    make_instance_type("g5g.2xlarge", arch="arm64", gpus=1),
    make_instance_type("m5.large"),
]


def names(types):
    return [t.name for t in types]


@pytest.mark.parametrize(("family", "pairs"), [
    ("AL2023", {("amd64", "standard"), ("amd64", "nvidia"), ("amd64", "neuron"), ("arm64", "standard"),
                ("arm64", "nvidia")}),
    ("AL2", {("amd64", "standard"), ("arm64", "standard"), ("amd64", "nvidia"), ("amd64", "neuron")}),
    ("Bottlerocket", {("amd64", "standard"), ("amd64", "neuron"), ("arm64", "standard"), ("amd64", "nvidia"),
                      ("arm64", "nvidia")}),
    ("Ubuntu", {(a, v) for a in ("amd64", "arm64") for v in ("standard", "nvidia", "neuron")}),
])
def test_the_architectures_and_accelerators_each_family_has_images_for(family, pairs):
    every = {(a, v) for a in ("amd64", "arm64") for v in ("standard", "nvidia", "neuron")}
    assert {pair for pair in every if has_image(family, *pair)} == pairs


def test_al2_offers_no_arm64_gpu_type_and_says_why():
    kept, missing = split_by_image("AL2", CATALOG)
    assert names(kept) == ["m6g.large", "g4dn.xlarge", "inf2.xlarge", "m5.large"]  # the catalog's order
    assert missing == (MissingImage("AL2", "arm64", "nvidia", ("g5g.2xlarge", "g5g.4xlarge", "g5g.xlarge")),)
    assert missing[0].reason == "3 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs"
    assert str(missing[0]) == (
        "3 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs: g5g.2xlarge, g5g.4xlarge, g5g.xlarge")


@pytest.mark.parametrize("family", ["AL2023", "Bottlerocket", "Ubuntu"])
def test_the_other_families_boot_every_type_of_the_catalog(family):
    assert split_by_image(family, CATALOG) == (CATALOG, ())


def test_each_gap_is_named_once_sorted_by_architecture_and_variant():
    arm_neuron = make_instance_type("imaginary-neuron.xlarge", arch="arm64", gpus=1, gpu_resource=NEURON)
    kept, missing = split_by_image("AL2", [arm_neuron, *CATALOG])
    assert names(kept) == ["m6g.large", "g4dn.xlarge", "inf2.xlarge", "m5.large"]
    assert [(m.arch, m.variant, m.instance_types) for m in missing] == [
        ("arm64", "neuron", ("imaginary-neuron.xlarge",)),
        ("arm64", "nvidia", ("g5g.2xlarge", "g5g.4xlarge", "g5g.xlarge")),
    ]
    assert missing[0].reason == "1 instance type(s) have no AL2 image for arm64 with AWS Neuron accelerators"
    _, bottlerocket = split_by_image("Bottlerocket", [arm_neuron, *CATALOG])
    assert [str(m) for m in bottlerocket] == [
        "1 instance type(s) have no Bottlerocket image for arm64 with AWS Neuron accelerators: imaginary-neuron.xlarge"]


def _offered(provider):
    config = NodeConfiguration.of(Provisioner(name="p", spec=ProvisionerSpec(provider=provider)))
    return offered_instance_types(config.ami_family, config.launch_template, CATALOG)


def test_a_provisioners_family_defaults_to_al2023_and_a_launch_template_offers_everything():
    assert _offered(None) == (CATALOG, ())
    assert _offered(AWSProvider()) == (CATALOG, ())
    kept, missing = _offered(AWSProvider(ami_family="AL2"))
    assert (len(kept), [m.instance_types for m in missing]) == (4, [("g5g.2xlarge", "g5g.4xlarge", "g5g.xlarge")])
    assert _offered(AWSProvider(launch_template="my-template")) == (CATALOG, ())
    with pytest.raises(ConfigurationError, match="unknown amiFamily 'Windows'"):
        _offered(AWSProvider(ami_family="Windows"))


def test_no_parameter_is_named_for_an_image_that_does_not_exist():
    # AL2's accelerated image is x86_64 only: an arm64 GPU instance must not get its parameter
    with pytest.raises(ConfigurationError, match="^AL2 has no image for arm64 with NVIDIA GPUs$"):
        parameter_name("AL2", "arm64", "nvidia", "1.29")
    assert parameter_name("AL2", "amd64", "nvidia", "1.29") == (
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-gpu/recommended/image_id")
    assert parameter_name("AL2023", "arm64", "nvidia", "1.36") == (
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/nvidia/recommended/image_id")
    assert sorted(AMI_FAMILIES) == ["AL2", "AL2023", "Bottlerocket", "Ubuntu"]
