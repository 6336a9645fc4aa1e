"""Which AMI a node boots: the SSM parameter EKS publishes for (family, architecture, accelerator, minor).

Why SSM and not DescribeImages: AWS publishes the recommended EKS images under stable parameter
paths, so a new release is picked up without configuration, and a family with no image for a
Kubernetes version is detectable (the parameter does not exist) and reported as a
ConfigurationError naming the parameter, rather than booting an image that cannot join.

Paths (AWS documentation; Karpenter v0.6.3 ``ami.go`` for AL2/Bottlerocket/Ubuntu):

- AL2023: ``/aws/service/eks/optimized-ami/<v>/amazon-linux-2023/<x86_64|arm64>/<standard|nvidia|neuron>/recommended/image_id``
- AL2: ``/aws/service/eks/optimized-ami/<v>/amazon-linux-2[-gpu|-arm64]/recommended/image_id``
  (``-gpu`` for NVIDIA or Neuron; AWS publishes none for 1.33 and later)
- Bottlerocket: ``/aws/service/bottlerocket/aws-k8s-<v>[-nvidia]/<x86_64|arm64>/latest/image_id``
- Ubuntu: ``/aws/service/canonical/ubuntu/eks/24.04/<v>/stable/current/<amd64|arm64>/hvm/ebs-gp3/ami-id``

Not every family has an image for every architecture and accelerator (:data:`IMAGE_VARIANTS`):
an instance type its Provisioner's family cannot boot is not offered for that Provisioner
(:func:`offered_instance_types`), so the solver never plans it and CreateFleet never gets it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from provisioner.api.types import AWSProvider
from provisioner.clock import Clock
from provisioner.cloudprovider.aws.errors import error_code, translate
from provisioner.cloudprovider.types import ConfigurationError
from provisioner.model.resources import AWS_NEURON, NVIDIA_GPU
from provisioner.scheduling.instancetypes import InstanceType

AL2023 = "AL2023"
AL2 = "AL2"
BOTTLEROCKET = "Bottlerocket"
UBUNTU = "Ubuntu"
AMI_FAMILIES = (AL2023, AL2, BOTTLEROCKET, UBUNTU)
DEFAULT_AMI_FAMILY = AL2023

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


def _family_variants(family: str) -> frozenset[tuple[str, str]]:
    variants = IMAGE_VARIANTS.get(family)
    if variants is None:
        raise ConfigurationError(f"unknown amiFamily {family!r}; expected one of {', '.join(AMI_FAMILIES)}")
    return variants


def has_image(family: str, arch: str, variant: str) -> bool:
    """``family`` publishes an image for ``arch`` (``amd64``/``arm64``) and ``variant`` (:data:`IMAGE_VARIANTS`).

    Raises ConfigurationError for an unknown family.
    """
    return (arch, variant) in _family_variants(family)


def parameter_name(family: str, arch: str, variant: str, kubernetes_minor: str) -> str:
    """The SSM parameter holding the image ID; ``arch`` is Kubernetes' (``amd64``/``arm64``).

    Raises ConfigurationError for an unknown family, or for an architecture and variant the
    family publishes no image for (AL2's accelerated image is x86_64 only: its parameter would
    name an image an arm64 GPU instance cannot boot).
    """
    if not has_image(family, arch, variant):
        raise ConfigurationError(f"{family} has no image for {arch} with {VARIANT_WORDS.get(variant, variant)}")
    ec2_arch = "x86_64" if arch == "amd64" else arch
    v = kubernetes_minor
    if family == AL2023:
        return (
            f"/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/{ec2_arch}/{variant}/recommended/image_id"
        )
    if family == AL2:
        if variant in (NVIDIA, NEURON):
            suffix = "-gpu"
        elif arch == "arm64":
            suffix = "-arm64"
        else:
            suffix = ""
        return f"/aws/service/eks/optimized-ami/{v}/amazon-linux-2{suffix}/recommended/image_id"
    if family == BOTTLEROCKET:
        nvidia = "-nvidia" if variant == NVIDIA else ""
        return f"/aws/service/bottlerocket/aws-k8s-{v}{nvidia}/{ec2_arch}/latest/image_id"
    if family == UBUNTU:
        return f"/aws/service/canonical/ubuntu/eks/24.04/{v}/stable/current/{arch}/hvm/ebs-gp3/ami-id"
    raise ConfigurationError(f"unknown amiFamily {family!r}; expected one of {', '.join(AMI_FAMILIES)}")


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
    variants = _family_variants(family)
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


def offered_instance_types(
    provider: AWSProvider | None, instance_types: Iterable[InstanceType]
) -> tuple[list[InstanceType], tuple[MissingImage, ...]]:
    """What a Provisioner with ``spec.provider`` ``provider`` may be offered: types its image family can boot.

    The family is ``amiFamily`` (default :data:`DEFAULT_AMI_FAMILY`); with a ``launchTemplate``
    the template names its own image, so every type is offered. See :func:`split_by_image`.
    """
    if provider is not None and provider.launch_template:
        return list(instance_types), ()
    family = (provider.ami_family if provider is not None else None) or DEFAULT_AMI_FAMILY
    return split_by_image(family, instance_types)


class AMIResolver:
    """Resolves parameter names to image IDs through SSM, caching answers (and misses) for ``ttl`` seconds."""

    def __init__(self, ssm: Any, clock: Clock, ttl: float = 300.0) -> None:
        self._ssm = ssm
        self._clock = clock
        self._ttl = ttl
        self._cache: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def image_id(self, parameter: str) -> str:
        """The image ID in ``parameter``.

        Raises ConfigurationError naming the parameter when it does not exist, LaunchError for
        other SSM failures (from the botocore error).
        """
        now = self._clock.monotonic()
        with self._lock:
            cached = self._cache.get(parameter)
        if cached is not None and now - cached[0] < self._ttl:
            value = cached[1]
        else:
            try:
                value = str(self._ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
            except ClientError as error:
                if error_code(error) != "ParameterNotFound":
                    raise translate(error, f"reading SSM parameter {parameter}") from error
                value = None
            except BotoCoreError as error:
                raise translate(error, f"reading SSM parameter {parameter}") from error
            with self._lock:
                self._cache[parameter] = (now, value)
        if value is None:
            raise ConfigurationError(
                f"no AMI published at SSM parameter {parameter} (this amiFamily has no image for this "
                "Kubernetes version and architecture)"
            )
        return value
