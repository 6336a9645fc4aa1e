"""The CloudProvider protocol: what the controllers ask of a cloud, and the errors it may raise.

Modelled on Karpenter's ``pkg/cloudprovider/types.go``: a small interface, typed errors that
the AWS implementation raises ``from`` the botocore error, and a fake for component tests
(:mod:`provisioner.cloudprovider.fake`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from provisioner.api.types import Provisioner
from provisioner.model.requirements import Requirements
from provisioner.model.taints import Taint
from provisioner.scheduling.instancetypes import InstanceType

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """What to launch for one planned node.

    ``id`` is stable for the same planned node (derived from the Provisioner and the pods'
    UIDs), so a retried launch of the same request never launches twice: it becomes the
    CreateFleet ``ClientToken`` and the ``groupless.dev/node-request`` tag.
    ``instance_type_options`` are ordered cheapest first (at most 60); ``requirements`` narrow
    zones and capacity types; ``labels`` and ``taints`` (dicts ``{key, value, effect}``) go into
    the node's bootstrap user data.
    """

    id: str
    provisioner: Provisioner
    instance_type_options: tuple[InstanceType, ...]
    requirements: Requirements
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """What a launch asked of its node, kept with the instance so that a restarted controller can write the Node.

    The controller creates the Node right after the instance; if it dies (or the API refuses)
    in between, the instance carries this record (EC2: its tags, written by CreateFleet in the
    same call that launches it; :mod:`provisioner.cloudprovider.launchrecord`), and adoption
    builds the Node from it. ``labels``: the request's labels except those the instance itself
    decides (zone, instance type, capacity type, arch, os, hostname, the Provisioner's name,
    the instance-type labels); ``taints``: the taints the node registers with (the plan's and
    the Provisioner's startup taints).
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class Machine:
    """A launched instance.

    ``provider_id`` is ``aws:///<zone>/<instance-id>`` (``kwok://<node name>`` for the kwok
    provider); ``name`` is the Node name to use (the lowercase private DNS name); ``labels``
    are the well-known labels the instance implies (instance type, zone, capacity type, arch,
    os); ``annotations`` are what the provider needs on the Node (kwok's
    ``kwok.x-k8s.io/node``); ``launch_time`` is RFC3339 when known. ``node_request_id`` and
    ``provisioner_name`` are the launch's tags (None when the instance has none); ``record``
    the rest of what the launch asked of its node (None when the instance carries no record).
    """

    provider_id: str
    instance_id: str
    name: str
    instance_type: str
    zone: str
    capacity_type: str
    labels: Mapping[str, str] = field(default_factory=dict)
    state: str = "running"
    launch_time: str | None = None
    node_request_id: str | None = None
    provisioner_name: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    record: LaunchRecord | None = None


class CloudProviderError(Exception):
    """Base of every error a cloud provider raises."""


class InsufficientCapacityError(CloudProviderError):
    """No requested offering had capacity; ``offerings`` lists (instance type, zone, capacity type)."""

    def __init__(self, message: str, offerings: Sequence[tuple[str, str, str]] = ()) -> None:
        super().__init__(message)
        self.offerings = tuple(offerings)


class NotFoundError(CloudProviderError):
    """The instance (or other object) does not exist (any more)."""


class LaunchError(CloudProviderError):
    """The launch failed for a reason other than capacity (throttling, an invalid parameter, ...)."""


class ConfigurationError(CloudProviderError):
    """The Provisioner or controller settings cannot work (no subnet matches, no AMI, no profile)."""


MachineList = list[Machine]
InstanceTypeList = list[InstanceType]


@runtime_checkable
class CloudProvider(Protocol):
    """What the controllers need from a cloud."""

    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        """Instance types with offerings in the Provisioner's subnets' zones, prices filled in."""
        ...

    def create(self, request: NodeRequest) -> Machine:
        """Launch one instance for ``request``; idempotent per ``request.id``.

        Raises InsufficientCapacityError, LaunchError, ConfigurationError.
        """
        ...

    def delete(self, provider_id: str) -> None:
        """Terminate the instance; an instance already gone is success."""
        ...

    def get(self, provider_id: str) -> Machine:
        """The instance, or NotFoundError when it is gone or terminated."""
        ...

    def list(self) -> MachineList:
        """Every live (not terminated) instance launched for this cluster, found by tags.

        Including those whose launch record names no Provisioner: adoption terminates them.
        """
        ...


class LoggingCloudProvider:
    """A CloudProvider that logs the walkthrough's launch line once per launch, whatever the provider.

    ``Launched instance: i-..., hostname: ..., type: r6gd.xlarge, zone: ap-south-1a,
    capacityType: on-demand`` (Karpenter v0.6.3's wording), with the Provisioner as a structured
    field, after every successful :meth:`create`; every other call goes straight to ``inner``.
    A decorator as Karpenter's ``pkg/cloudprovider/metrics`` one, so that no provider logs it
    itself and no caller has to ask whether its provider does. Build with :meth:`around`.
    """

    def __init__(self, inner: CloudProvider) -> None:
        self.inner = inner

    @classmethod
    def around(cls, cloud: CloudProvider) -> LoggingCloudProvider:
        """``cloud`` with the launch line: itself when it already is one (the line is never logged twice)."""
        return cloud if isinstance(cloud, LoggingCloudProvider) else cls(cloud)

    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        return self.inner.get_instance_types(provisioner)

    def create(self, request: NodeRequest) -> Machine:
        machine = self.inner.create(request)
        log.info(
            "Launched instance: %s, hostname: %s, type: %s, zone: %s, capacityType: %s",
            machine.instance_id,
            machine.name,
            machine.instance_type,
            machine.zone,
            machine.capacity_type,
            extra={"provisioner": request.provisioner.name},
        )
        return machine

    def delete(self, provider_id: str) -> None:
        self.inner.delete(provider_id)

    def get(self, provider_id: str) -> Machine:
        return self.inner.get(provider_id)

    def list(self) -> MachineList:
        return self.inner.list()
