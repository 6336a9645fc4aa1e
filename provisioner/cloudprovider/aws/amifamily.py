"""What a Provisioner's ``amiFamily`` decides about its nodes, without a client: images, disks, kubelet.

Why one module: the same facts shape the instance types the solver packs (``groupless plan``,
the AWS and the kwok providers, :mod:`provisioner.cloudprovider.aws.catalog`) and the launch
templates EC2 boots (:mod:`provisioner.cloudprovider.aws.launchtemplates`); if they were kept
apart, a plan could count on a disk or a pod slot the launched node does not have.

Facts per family, from Karpenter's ``pkg/providers/amifamily`` (``al2.go``, ``al2023.go``,
``bottlerocket.go``, ``ubuntu.go``, ``resolver.go``):

- the device pods' ephemeral storage lives on (``EphemeralBlockDevice``): ``/dev/xvda`` for AL2
  and AL2023, ``/dev/sda1`` for Ubuntu, and Bottlerocket's data volume ``/dev/xvdb`` (its OS
  volume is ``/dev/xvda``);
- the default disks when the Provisioner gives no ``blockDeviceMappings``
  (``DefaultBlockDeviceMappings``): that device, 20 GiB; for Bottlerocket a 4 GiB OS volume plus
  the 20 GiB data volume;
- ``FeatureFlags``: AL2, AL2023 and Ubuntu size kube-reserved memory by the ENI-limited pod count
  whatever the node's pod capacity (``UsesENILimitedMemoryOverhead``) and honour
  ``kubeletConfiguration.podsPerCore`` (``PodsPerCoreEnabled``); Bottlerocket sizes it by the
  node's real pod capacity and ignores ``podsPerCore`` (its settings API has no such field,
  bottlerocket-os/bottlerocket#1721);
- which (architecture, accelerator) pairs have an EKS image (:data:`IMAGE_VARIANTS`): an
  instance type without one is not offered to the Provisioner (:func:`offered_instance_types`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from provisioner.api.types import AWSProvider
from provisioner.cloudprovider.types import ConfigurationError
from provisioner.model.quantity import parse_quantity
from provisioner.model.resources import AWS_NEURON, GIB, NVIDIA_GPU
from provisioner.scheduling.instancetypes import InstanceType

AL2023 = "AL2023"
AL2 = "AL2"
BOTTLEROCKET = "Bottlerocket"
UBUNTU = "Ubuntu"
AMI_FAMILIES = (AL2023, AL2, BOTTLEROCKET, UBUNTU)
DEFAULT_AMI_FAMILY = AL2023

# --------------------------------------------------------------------------- disks
#: Size of a family's default data (ephemeral-storage) volume, GiB (Karpenter's ``DefaultEBS``).
DEFAULT_VOLUME_GIB = 20
#: Size of Bottlerocket's default OS volume ``/dev/xvda``, GiB.
BOTTLEROCKET_OS_VOLUME_GIB = 4
ROOT_DEVICE = "/dev/xvda"
UBUNTU_ROOT_DEVICE = "/dev/sda1"
BOTTLEROCKET_DATA_DEVICE = "/dev/xvdb"


def ephemeral_block_device(family: str) -> str:
    """The device whose volume holds pods' ephemeral storage.

    ``/dev/xvda``; Ubuntu's root ``/dev/sda1``; Bottlerocket's data volume ``/dev/xvdb``.
    """
    if family == BOTTLEROCKET:
        return BOTTLEROCKET_DATA_DEVICE
    if family == UBUNTU:
        return UBUNTU_ROOT_DEVICE
    return ROOT_DEVICE


def default_block_devices(family: str) -> tuple[tuple[str, int], ...]:
    """(device, GiB) of the disks a node of ``family`` gets when the Provisioner names none."""
    if family == BOTTLEROCKET:
        return ((ROOT_DEVICE, BOTTLEROCKET_OS_VOLUME_GIB), (BOTTLEROCKET_DATA_DEVICE, DEFAULT_VOLUME_GIB))
    return ((ephemeral_block_device(family), DEFAULT_VOLUME_GIB),)


def volume_gib(volume_size: str) -> int:
    """An EBS ``volumeSize`` quantity in whole GiB, rounded up (EC2 sizes volumes in GiB): ``100G`` -> 94.

    Raises QuantityError (a ValueError) when the quantity does not parse.
    """
    return math.ceil(parse_quantity(volume_size) / GIB)


def ephemeral_storage_gib(provider: AWSProvider | None, family: str) -> int:
    """GiB of the volume pods' ephemeral storage lives on (Karpenter's ``ephemeralStorage``).

    The Provisioner's mapping of :func:`ephemeral_block_device` when it gives one with a
    ``volumeSize``, else the family's default for that device (20 GiB): mappings that leave the
    device out do not change it. Raises QuantityError for a malformed size.
    """
    device = ephemeral_block_device(family)
    for mapping in (provider.block_device_mappings if provider is not None else None) or ():
        if mapping.device_name == device and mapping.ebs is not None and mapping.ebs.volume_size is not None:
            return volume_gib(mapping.ebs.volume_size)
    return dict(default_block_devices(family)).get(device, DEFAULT_VOLUME_GIB)


# --------------------------------------------------------------------------- kubelet
def uses_eni_limited_memory_overhead(family: str) -> bool:
    """Whether kube-reserved memory counts the ENI-limited pods (True) or the node's pod capacity (Bottlerocket)."""
    return family != BOTTLEROCKET


def pods_per_core_enabled(family: str) -> bool:
    """Whether ``kubeletConfiguration.podsPerCore`` reaches the kubelet (not on Bottlerocket)."""
    return family != BOTTLEROCKET


# --------------------------------------------------------------------------- images
STANDARD = "standard"
NVIDIA = "nvidia"
NEURON = "neuron"
#: How a reason names a variant: "no AL2 image for arm64 with NVIDIA GPUs".
VARIANT_WORDS = {STANDARD: "no accelerator", NVIDIA: "NVIDIA GPUs", NEURON: "AWS Neuron accelerators"}

AMD64 = "amd64"
ARM64 = "arm64"
_EVERY_PAIR = frozenset((arch, variant) for arch in (AMD64, ARM64) for variant in (STANDARD, NVIDIA, NEURON))
#: The (architecture, variant) pairs each family publishes an EKS image for, architectures as
#: Kubernetes names them. From Karpenter's ``pkg/providers/amifamily`` (``DescribeImageQuery``):
#: AL2023 has standard and NVIDIA images for both architectures and a Neuron image for x86_64
#: (``al2023.go``); AL2 a standard image for each architecture and one x86_64-only accelerated
#: image (``amazon-linux-2-gpu``) for NVIDIA and Neuron (``al2.go``); Bottlerocket a standard
#: image for each architecture (x86_64's also serving Neuron) and an NVIDIA image for each
#: (``bottlerocket.go``); Ubuntu one image per architecture that Karpenter offers to every
#: instance type of it (``ubuntu.go`` of Karpenter v0.x: architecture its only requirement).
IMAGE_VARIANTS: dict[str, frozenset[tuple[str, str]]] = {
    AL2023: frozenset({(AMD64, STANDARD), (AMD64, NVIDIA), (AMD64, NEURON), (ARM64, STANDARD), (ARM64, NVIDIA)}),
    AL2: frozenset({(AMD64, STANDARD), (ARM64, STANDARD), (AMD64, NVIDIA), (AMD64, NEURON)}),
    BOTTLEROCKET: frozenset({(AMD64, STANDARD), (AMD64, NEURON), (ARM64, STANDARD), (AMD64, NVIDIA), (ARM64, NVIDIA)}),
    UBUNTU: _EVERY_PAIR,
}


def variant_of(instance_type: InstanceType) -> str:
    """``nvidia``, ``neuron`` or ``standard`` for an instance type's accelerators."""
    if instance_type.capacity.get(NVIDIA_GPU) > 0:
        return NVIDIA
    if instance_type.capacity.get(AWS_NEURON) > 0:
        return NEURON
    return STANDARD


def family_variants(family: str) -> frozenset[tuple[str, str]]:
    """:data:`IMAGE_VARIANTS` of ``family``; ConfigurationError for an unknown family."""
    variants = IMAGE_VARIANTS.get(family)
    if variants is None:
        raise ConfigurationError(f"unknown amiFamily {family!r}; expected one of {', '.join(AMI_FAMILIES)}")
    return variants


def has_image(family: str, arch: str, variant: str) -> bool:
    """``family`` publishes an image for ``arch`` (``amd64``/``arm64``) and ``variant`` (:data:`IMAGE_VARIANTS`).

    Raises ConfigurationError for an unknown family.
    """
    return (arch, variant) in family_variants(family)


@dataclass(frozen=True)
class MissingImage:
    """Instance types left out for a Provisioner because its ``amiFamily`` has no image for them.

    ``instance_types``: their names, sorted. ``str()`` is the reason shown in logs and plans:
    ``3 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs: g5g.2xlarge, ...``.
    """

    family: str
    arch: str
    variant: str
    instance_types: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reason without the names: ``3 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs``."""
        words = VARIANT_WORDS.get(self.variant, self.variant)
        return f"{len(self.instance_types)} instance type(s) have no {self.family} image for {self.arch} with {words}"

    def __str__(self) -> str:
        return f"{self.reason}: {', '.join(self.instance_types)}"


def split_by_image(
    family: str, instance_types: Iterable[InstanceType]
) -> tuple[list[InstanceType], tuple[MissingImage, ...]]:
    """The instance types ``family`` has an image for (in their order), and those it has none for.

    The ones left out are grouped by architecture and variant (sorted), so a reason names each
    gap once. Raises ConfigurationError for an unknown family.
    """
    variants = family_variants(family)
    kept: list[InstanceType] = []
    missing: dict[tuple[str, str], list[str]] = {}
    for instance_type in instance_types:
        pair = (instance_type.arch, variant_of(instance_type))
        if pair in variants:
            kept.append(instance_type)
        else:
            missing.setdefault(pair, []).append(instance_type.name)
    return kept, tuple(
        MissingImage(family, arch, variant, tuple(sorted(names))) for (arch, variant), names in sorted(missing.items())
    )


def family_of(provider: AWSProvider | None) -> str:
    """The Provisioner's ``amiFamily``, :data:`DEFAULT_AMI_FAMILY` when unset."""
    return (provider.ami_family if provider is not None else None) or DEFAULT_AMI_FAMILY


def offered_instance_types(
    family: str, launch_template: bool, instance_types: Iterable[InstanceType]
) -> tuple[list[InstanceType], tuple[MissingImage, ...]]:
    """What a Provisioner of ``family`` may be offered: the types its images can boot (:func:`split_by_image`).

    With its own ``launch_template`` the template names the image, so every type is offered.
    Raises ConfigurationError for an unknown family.
    """
    if launch_template:
        return list(instance_types), ()
    return split_by_image(family, instance_types)


__all__ = [
    "AL2",
    "AL2023",
    "AMI_FAMILIES",
    "BOTTLEROCKET",
    "DEFAULT_AMI_FAMILY",
    "DEFAULT_VOLUME_GIB",
    "IMAGE_VARIANTS",
    "UBUNTU",
    "MissingImage",
    "default_block_devices",
    "ephemeral_block_device",
    "ephemeral_storage_gib",
    "family_of",
    "has_image",
    "offered_instance_types",
    "pods_per_core_enabled",
    "split_by_image",
    "uses_eni_limited_memory_overhead",
    "variant_of",
    "volume_gib",
]
