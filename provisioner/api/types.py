"""The Provisioner API (``karpenter.sh/v1alpha5``, kind ``Provisioner``) as frozen dataclasses.

Field names follow the wire form in snake_case; :mod:`provisioner.api.schemas` loads and dumps
the wire form (camelCase JSON) losslessly. Quantities stay as the strings the user wrote
(``"1000"``, ``"512Gi"``) in the API types; :meth:`Limits.parsed` and the quantity parser turn
them into integers (milli-CPU, bytes) at the edge of the core.

Source of the field set: Karpenter v0.6.3's ``Provisioner`` plus these fields of later
versions: ``startupTaints``, ``weight``, ``blockDeviceMappings``, kubelet
``maxPods``/``podsPerCore``/``systemReserved``/``kubeReserved``/``evictionHard``, ``consolidation`` (v0.15-v0.31).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from provisioner.model.labels import PROVISIONER_NAME
from provisioner.model.quantity import parse_resource_list
from provisioner.model.resources import Resources
from provisioner.model.taints import Taint as Taint  # the value type lives with the other taint rules


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    """EC2 instance metadata options (IMDS). ``None`` means "EC2's default"."""

    http_endpoint: str | None = None
    http_protocol_ipv6: str | None = None
    http_put_response_hop_limit: int | None = None
    http_tokens: str | None = None


@dataclass(frozen=True, slots=True)
class EBS:
    volume_size: str | None = None  # a quantity, e.g. "20Gi"
    volume_type: str | None = None
    iops: int | None = None
    throughput: int | None = None
    encrypted: bool | None = None
    kms_key_id: str | None = None
    delete_on_termination: bool | None = None
    snapshot_id: str | None = None


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    device_name: str
    ebs: EBS | None = None


@dataclass(frozen=True, slots=True)
class AWSProvider:
    """The ``spec.provider`` block for AWS (Karpenter's ``extensions.karpenter.sh/v1alpha1 AWS``)."""

    subnet_selector: tuple[tuple[str, str], ...] | None = None
    security_group_selector: tuple[tuple[str, str], ...] | None = None
    instance_profile: str | None = None
    launch_template: str | None = None
    ami_family: str | None = None
    tags: tuple[tuple[str, str], ...] | None = None
    metadata_options: MetadataOptions | None = None
    block_device_mappings: tuple[BlockDeviceMapping, ...] | None = None

    @property
    def subnet_selector_map(self) -> dict[str, str]:
        return dict(self.subnet_selector or ())

    @property
    def security_group_selector_map(self) -> dict[str, str]:
        return dict(self.security_group_selector or ())

    @property
    def tags_map(self) -> dict[str, str]:
        return dict(self.tags or ())


@dataclass(frozen=True, slots=True)
class KubeletConfiguration:
    """Kubelet settings that change a node's allocatable or its bootstrap.

    ``system_reserved``, ``kube_reserved`` and ``eviction_hard`` map resource names (or
    eviction signals such as ``memory.available``) to quantity strings. ``pods_per_core`` caps
    the pod capacity at that many pods per vCPU (0 or None: no cap; kubelet's ``podsPerCore``).
    """

    cluster_dns: tuple[str, ...] | None = None
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: tuple[tuple[str, str], ...] | None = None
    kube_reserved: tuple[tuple[str, str], ...] | None = None
    eviction_hard: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """``spec.limits.resources``: resource name -> quantity string."""

    resources: tuple[tuple[str, str], ...] = ()

    def parsed(self) -> Resources:
        """The limits in core units: cpu in milli-CPU, memory and storage in bytes, counts as counts.

        ``(("cpu", "1000"), ("memory", "1Ti"))`` -> ``Resources(cpu=1000000, memory=1099511627776)``.
        Raises QuantityError naming the resource (a decoded Provisioner's quantities always parse).
        """
        return parse_resource_list(dict(self.resources))


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None
    severity: str | None = None


@dataclass(frozen=True, slots=True)
class Consolidation:
    """``spec.consolidation`` (Karpenter v0.15-v0.31): ``enabled`` turns consolidation on (``None``: off)."""

    enabled: bool | None = None


@dataclass(frozen=True, slots=True)
class ProvisionerStatus:
    resources: tuple[tuple[str, str], ...] = ()
    conditions: tuple[Condition, ...] = ()
    last_scale_time: str | None = None


@dataclass(frozen=True, slots=True)
class ProvisionerSpec:
    requirements: tuple[NodeSelectorRequirement, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Limits | None = None
    provider: AWSProvider | None = None
    kubelet_configuration: KubeletConfiguration | None = None
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    weight: int | None = None
    consolidation: Consolidation | None = None

    @property
    def consolidation_enabled(self) -> bool:
        """``spec.consolidation.enabled`` is true (the webhook refuses it beside ``ttlSecondsAfterEmpty``)."""
        return self.consolidation is not None and self.consolidation.enabled is True


@dataclass(frozen=True, slots=True)
class Provisioner:
    """A whole Provisioner object. ``metadata`` keeps the wire form (a plain dict)."""

    name: str
    spec: ProvisionerSpec
    status: ProvisionerStatus = field(default_factory=ProvisionerStatus)
    uid: str = ""
    resource_version: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def labels_with_name(self) -> dict[str, str]:
        """The Provisioner's labels plus ``karpenter.sh/provisioner-name=<name>`` (every node gets both)."""
        return {**dict(self.spec.labels), PROVISIONER_NAME: self.name}
