"""The well-known AWS instance-type labels in provisioner.model.labels are exactly the ones the catalog emits."""

from __future__ import annotations

from provisioner.cloudprovider.aws import catalog
from provisioner.model.labels import AWS_INSTANCE_LABELS

RICH = {
    "InstanceType": "g5.2xlarge",
    "VCpuInfo": {"DefaultVCpus": 8},
    "MemoryInfo": {"SizeInMiB": 32768},
    "Hypervisor": "nitro",
    "GpuInfo": {"Gpus": [{"Name": "A10G", "Manufacturer": "NVIDIA", "Count": 1}]},
    "InstanceStorageInfo": {"NvmeSupport": "required", "TotalSizeInGB": 450},
}


def test_catalog_label_constants_are_the_well_known_aws_labels() -> None:
    declared = {value for name, value in vars(catalog).items() if name.startswith("LABEL_INSTANCE_")}
    assert declared == AWS_INSTANCE_LABELS


def test_a_fully_described_type_emits_every_well_known_aws_label() -> None:
    labels = dict(catalog.shape_labels(RICH))
    assert set(labels) == AWS_INSTANCE_LABELS
    assert (labels["karpenter.k8s.aws/instance-family"], labels["karpenter.k8s.aws/instance-gpu-name"],
            labels["karpenter.k8s.aws/instance-local-nvme"]) == ("g5", "a10g", "450")
