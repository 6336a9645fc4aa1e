"""Instance types the Provisioner's amiFamily has no image for are not offered, and never reach CreateFleet.

moto offers the arm64 GPU types (g5g, NVIDIA T4G) in us-east-1, not in the walkthrough's
ap-south-1: these tests seed a second account there in the session's moto server.
"""

import logging
import uuid

import pytest

from localcluster.aws import seed_account
from provisioner.clock import FakeClock
from provisioner.cloudprovider.aws.provider import AWSCloudProvider, RawCatalog
from provisioner.cloudprovider.types import ConfigurationError, NodeRequest
from provisioner.model.requirements import Requirements
from tests.integration.aws.conftest import aws_client, make_provisioner, make_settings

CLUSTER = "gpu-demo"
SELECTOR = ((f"kubernetes.io/cluster/{CLUSTER}", "*"),)
G5G = ("g5g.16xlarge", "g5g.2xlarge", "g5g.4xlarge", "g5g.8xlarge", "g5g.xlarge")  # arm64, NVIDIA T4G


@pytest.fixture(scope="module")
def us_east_1(account):
    return seed_account(account.endpoint_url, region="us-east-1", cluster=CLUSTER)


@pytest.fixture(scope="module")
def us_catalog():
    return RawCatalog()


@pytest.fixture
def gpu_provider(us_east_1, us_catalog):
    return AWSCloudProvider(make_settings(us_east_1), aws_client(us_east_1, "ec2"), aws_client(us_east_1, "ssm"),
                            None, FakeClock(), us_catalog)


def provisioner(name, **fields):
    return make_provisioner(name, subnet_selector=SELECTOR, security_group_selector=SELECTOR, **fields)


def test_al2_offers_no_arm64_gpu_type_and_names_them(gpu_provider, caplog):
    al2023 = {t.name for t in gpu_provider.get_instance_types(provisioner("al2023"))}
    assert set(G5G) <= al2023  # AL2023 publishes an arm64 NVIDIA image
    al2 = provisioner("al2-gpu", ami_family="AL2")
    with caplog.at_level(logging.INFO, logger="provisioner.cloudprovider.aws.provider"):
        offered = {t.name for t in gpu_provider.get_instance_types(al2)}
        gpu_provider.get_instance_types(al2)  # the same gap again: logged once
    assert al2023 - offered == set(G5G)
    assert {"g4dn.xlarge", "inf1.xlarge", "m6g.large", "m5.large"} <= offered  # x86_64 GPU, Neuron, arm64, x86_64
    (missing,) = gpu_provider.missing_images("al2-gpu")
    assert str(missing) == f"5 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs: {', '.join(G5G)}"
    assert gpu_provider.missing_images("al2023") == ()
    logged = [r.getMessage() for r in caplog.records if "not offering" in r.getMessage()]
    assert logged == [f"Provisioner al2-gpu: not offering {missing}"]


def test_a_request_for_an_arm64_gpu_type_under_al2_fails_before_create_fleet(gpu_provider):
    calls = []
    gpu_provider._ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                           lambda params, **_: calls.append(params))
    types = {t.name: t for t in gpu_provider.get_instance_types(provisioner("al2023"))}
    request = NodeRequest(
        id=f"req-{uuid.uuid4().hex[:12]}",
        provisioner=provisioner("al2-gpu", ami_family="AL2"),
        instance_type_options=(types["g5g.xlarge"], types["g5g.2xlarge"]),
        requirements=Requirements.from_labels({"karpenter.sh/capacity-type": "on-demand"}),
        labels={"karpenter.sh/provisioner-name": "al2-gpu"},
    )
    with pytest.raises(ConfigurationError, match="^AL2 has no image for arm64 with NVIDIA GPUs$"):
        gpu_provider.create(request)
    assert calls == []
