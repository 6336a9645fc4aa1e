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

Not every family has an image for every architecture and accelerator
(:data:`~provisioner.cloudprovider.aws.amifamily.IMAGE_VARIANTS`):
an instance type its Provisioner's family cannot boot is not offered for that Provisioner
(:func:`~provisioner.cloudprovider.aws.amifamily.offered_instance_types`), so the solver never
plans it and CreateFleet never gets it.
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from provisioner.clock import Clock
from provisioner.cloudprovider.aws.amifamily import (
    AL2,
    AL2023,
    AMI_FAMILIES,
    BOTTLEROCKET,
    NEURON,
    NVIDIA,
    UBUNTU,
    VARIANT_WORDS,
    has_image,
)
from provisioner.cloudprovider.aws.errors import error_code, translate
from provisioner.cloudprovider.types import ConfigurationError

#: The image facts (families, variants, which types a family can boot) are the pure
#: :mod:`provisioner.cloudprovider.aws.amifamily`'s, shared with the instance-type conversion;
#: this module adds where the images are published and reads them from SSM.


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


__all__ = ["AMIResolver", "parameter_name"]
