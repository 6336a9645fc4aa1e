"""Adoption: finish the launches whose Node was never written; terminate instances nobody can own.

Launching is two steps, the instance (``CloudProvider.create``) and then its Node object. A
controller killed between them, a leader that lost its Lease there, or a launch whose answer
was lost (EC2 launched, the controller saw an error) leaves a running instance without a Node.
Garbage collection would terminate it after its grace (5 min), paid for and unused all that
time, while pending pods get new instances. Adoption uses it instead: the instance's tags say
what the launch asked for (:mod:`provisioner.cloudprovider.launchrecord`: the Provisioner, the
node request, labels and taints), its type says its size, so the Node is written exactly as the
launcher writes it (:func:`provisioner.controllers.provisioning.nodes.node_manifest`: labels,
taints with ``karpenter.sh/not-ready``, startup taints, finalizer, owner, capacity and
allocatable from the cloud provider's instance-type conversion, price). Without nominations:
the pods it was launched for may be gone or changed, so the round that follows places whatever
is pending onto it as in-flight capacity, like any node still launching.

An instance that cannot be attributed (no ``karpenter.sh/provisioner-name`` tag, its
Provisioner gone or being deleted) is terminated at once, with a log line and a Warning Event
``OrphanTerminated`` on the Node it would have been; so is one whose Node the API refuses
for good (invalid, forbidden, its name taken by another instance). Karpenter has no such step in
v0.6.3; v0.32+ avoids the gap by creating the NodeClaim before the instance. Here the instance's
tags are the record.

When (:class:`Adoption`): before the first provisioning round of a leader (the controller
process runs :meth:`Adoption.adopt` after its cache syncs, before any worker or round starts;
while it has not completed, each round tries again first), and for a while after a launch
ended in a way that may have left an instance behind (a create that failed other than for
capacity or configuration: its answer may be lost; a termination that failed), seen through
:meth:`Adoption.watch`. A pass lists the cloud's instances once; it runs under the provisioning
round lock, so no launch of this process is between its two steps meanwhile. Nodes written are
handed to the in-flight ledger, so the round that follows sees them before the cache does.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock
from provisioner.cloudprovider.types import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    InstanceTypeList,
    InsufficientCapacityError,
    Machine,
    MachineList,
    NodeRequest,
)
from provisioner.controllers.garbagecollection import instance_id_of
from provisioner.controllers.provisioning.nodes import node_manifest
from provisioner.kube.api import AlreadyExistsError, ApiError, KubeAPI, Object
from provisioner.kube.events import EventRecorder
from provisioner.model import objects
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.settings import NodeDefaults
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)

#: Seconds adoption stays due after a launch that may have left an instance: long enough for
#: EC2's eventually consistent DescribeInstances to show an instance whose launch answer was lost.
SETTLE_SECONDS = 30.0


class Outcome(enum.Enum):
    """What a pass did with one instance that had no Node."""

    #: Its Node was written (or found written by someone else meanwhile).
    ADOPTED = "adopted"
    #: Terminated: nobody can own it.
    TERMINATED = "terminated"
    #: Left for the next pass: the API or the cloud failed, or the instance has no name yet.
    RETRY = "retry"
    #: Left alone: its Provisioner exists but cannot be decoded (garbage collection's grace applies).
    SKIPPED = "skipped"


@dataclass(frozen=True)
class AdoptionResult:
    """One pass: ``listed`` whether the cloud answered; provider ID -> :class:`Outcome` of each instance without a Node.

    ``nodes``: provider ID -> the Node name written for each instance adopted.
    """

    listed: bool = True
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    nodes: Mapping[str, str] = field(default_factory=dict)

    def of(self, outcome: Outcome) -> list[str]:
        """The provider IDs that ended with ``outcome``, sorted."""
        return sorted(p for p, o in self.outcomes.items() if o is outcome)


class Adoption:
    """Adopts or terminates this cluster's instances that have no Node (see the module docstring).

    ``cloud``: the provider to list, read instance types from and terminate through. ``ledger``:
    the provisioning controller's, which learns the Nodes written. ``nodes``: the labels and
    annotations every Node gets (the launcher's). Thread-safe; :meth:`adopt` itself is meant to
    run under the provisioning round lock.
    """

    def __init__(self, api: KubeAPI, cloud: CloudProvider, clock: Clock, recorder: EventRecorder,
                 ledger: InFlightLedger, nodes: NodeDefaults, *, settle_seconds: float = SETTLE_SECONDS) -> None:
        self.api = api
        self.cloud = cloud
        self.clock = clock
        self.recorder = recorder
        self.ledger = ledger
        self.nodes = nodes
        self.settle_seconds = settle_seconds
        self._lock = threading.Lock()
        self._completed = False  # a pass has run to the end since this leader started
        self._retry = False  # the last pass left instances for the next one
        self._watch_until = 0.0  # monotonic: a launch may have left an instance until then

    # ------------------------------------------------------------------ when
    @property
    def due(self) -> bool:
        """Whether the next round should run a pass first."""
        with self._lock:
            return not self._completed or self._retry or self.clock.monotonic() < self._watch_until

    def mark_due(self) -> None:
        """A launch may have left an instance without a Node: look for it during the next rounds."""
        with self._lock:
            self._watch_until = self.clock.monotonic() + self.settle_seconds

    def watch(self, cloud: CloudProvider) -> CloudProvider:
        """``cloud`` for the launcher: a create or delete that fails in a way that may leave an instance marks adoption due."""
        return _Watched(cloud, self)

    # ------------------------------------------------------------------ a pass
    def adopt_if_due(self, snapshot: Snapshot) -> AdoptionResult | None:
        """:meth:`adopt` when :attr:`due`; None otherwise."""
        return self.adopt(snapshot) if self.due else None

    def adopt(self, snapshot: Snapshot) -> AdoptionResult:
        """Adopt or terminate every listed instance without a Node in ``snapshot`` or the ledger's writes.

        Never raises for the cloud or the API: what fails is left for the next pass (logged).
        """
        try:
            machines = self.cloud.list()
        except CloudProviderError as error:
            log.warning("Could not list instances to adopt those without a node (retrying next round): %s", error)
            with self._lock:
                self._retry = True
            return AdoptionResult(listed=False)
        written = self.ledger.written()
        owned = {instance_id_of(objects.provider_id(n)) for n in (*snapshot.nodes.values(), *written.values())} - {""}
        outcomes: dict[str, Outcome] = {}
        nodes: dict[str, str] = {}
        types: dict[str, InstanceTypeList | None] = {}
        for machine in machines:
            if machine.instance_id in owned:
                continue
            outcome, node = self._adopt_one(machine, snapshot, types)
            outcomes[machine.provider_id] = outcome
            if node is not None:
                nodes[machine.provider_id] = objects.name(node)
        with self._lock:
            self._completed = True
            self._retry = Outcome.RETRY in outcomes.values()
        return AdoptionResult(True, outcomes, nodes)

    def _adopt_one(self, machine: Machine, snapshot: Snapshot,
                   types: dict[str, InstanceTypeList | None]) -> tuple[Outcome, Object | None]:
        name = machine.provisioner_name
        if not name:
            return self._terminate(machine, "it has no karpenter.sh/provisioner-name tag"), None
        raw = snapshot.provisioner_objects.get(name)
        if raw is None:
            return self._terminate(machine, f"its Provisioner {name} no longer exists"), None
        if objects.deleting(raw):
            return self._terminate(machine, f"its Provisioner {name} is being deleted"), None
        provisioner = snapshot.provisioners.get(name)
        if provisioner is None:
            log.warning("Not adopting instance %s yet: its Provisioner %s cannot be read (%s)", machine.instance_id,
                        name, snapshot.provisioner_errors.get(name, "unknown error"), extra={"provisioner": name})
            return Outcome.SKIPPED, None
        if not machine.name:
            log.info("Not adopting instance %s yet: it has no private DNS name (node name) yet", machine.instance_id)
            return Outcome.RETRY, None
        if name not in types:
            types[name] = self._instance_types(provisioner)
        listed = types[name]
        instance_type = next((t for t in listed or () if t.name == machine.instance_type), None)
        return self._write_node(machine, provisioner, objects.uid(raw), instance_type)

    def _instance_types(self, provisioner: Provisioner) -> InstanceTypeList | None:
        try:
            return self.cloud.get_instance_types(provisioner)
        except CloudProviderError as error:
            log.warning("Could not get the instance types of Provisioner %s for adoption: %s", provisioner.name, error,
                        extra={"provisioner": provisioner.name})
            return None

    def _write_node(self, machine: Machine, provisioner: Provisioner, provisioner_uid: str,
                    instance_type: InstanceType | None) -> tuple[Outcome, Object | None]:
        record = machine.record
        manifest = node_manifest(
            provisioner=provisioner,
            provisioner_uid=provisioner_uid,
            machine=machine,
            instance_type=instance_type,
            planned_labels=record.labels if record is not None else {},
            planned_taints=record.taints if record is not None else (),
            nominations=None,
            extra_labels=self.nodes.labels,
            extra_annotations=self.nodes.annotations,
        )
        try:
            node = self.api.create("Node", manifest)
        except AlreadyExistsError:
            return self._existing(machine)
        except ApiError as error:
            if error.transient:
                log.warning("Could not write node %s for instance %s (retrying next round): %s", machine.name,
                            machine.instance_id, error, extra={"provisioner": provisioner.name})
                return Outcome.RETRY, None
            return self._terminate(machine, f"the API refused its node {machine.name}: {error}"), None
        self.ledger.wrote(machine.name, node)
        size = "" if instance_type is not None else "; allocatable unknown until its kubelet reports"
        log.info("Adopted instance %s (%s, %s, %s) launched for node request %s: wrote node %s%s", machine.instance_id,
                 machine.instance_type, machine.zone, machine.capacity_type, machine.node_request_id or "(untagged)",
                 machine.name, size, extra={"provisioner": provisioner.name})
        self.recorder.normal(node, "Adopted", f"Node written for instance {machine.instance_id} ({machine.instance_type}, "
                                              f"{machine.zone}, {machine.capacity_type}), whose launch ended before its "
                                              f"node was created")
        metrics.ORPHAN_INSTANCES.labels(provisioner=provisioner.name, outcome=Outcome.ADOPTED.value).inc()
        return Outcome.ADOPTED, node

    def _existing(self, machine: Machine) -> tuple[Outcome, Object | None]:
        """The Node named for ``machine`` exists already: ours when it has the instance's provider ID."""
        try:
            existing = self.api.get("Node", machine.name)
        except ApiError as error:
            log.warning("Could not read node %s of instance %s (retrying next round): %s", machine.name,
                        machine.instance_id, error)
            return Outcome.RETRY, None
        if objects.provider_id(existing) == machine.provider_id:
            self.ledger.wrote(machine.name, existing)
            return Outcome.ADOPTED, existing
        reason = f"its node name {machine.name} is taken by a node of {objects.provider_id(existing) or 'no instance'}"
        return self._terminate(machine, reason), None

    def _terminate(self, machine: Machine, reason: str) -> Outcome:
        try:
            self.cloud.delete(machine.provider_id)
        except CloudProviderError as error:
            log.error("Could not terminate instance %s (%s; retrying next round): %s", machine.instance_id, reason, error)
            return Outcome.RETRY
        log.warning("Terminated instance %s (%s): %s", machine.instance_id, machine.provider_id, reason,
                    extra={"provisioner": machine.provisioner_name or ""})
        reference: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": machine.name or machine.instance_id}}
        self.recorder.warning(reference, "OrphanTerminated",
                              f"Terminated instance {machine.instance_id} launched without a node: {reason}")
        metrics.ORPHAN_INSTANCES.labels(provisioner=machine.provisioner_name or "",
                                        outcome=Outcome.TERMINATED.value).inc()
        return Outcome.TERMINATED


class _Watched:
    """A CloudProvider that marks adoption due when a create or a delete fails in a way that may leave an instance.

    A create that failed for capacity or configuration launched nothing; any other failure
    (throttling, a lost answer, a server error) may have launched. A failed delete leaves the
    instance running.
    """

    def __init__(self, inner: CloudProvider, adoption: Adoption) -> None:
        self.inner = inner
        self.adoption = adoption

    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        return self.inner.get_instance_types(provisioner)

    def create(self, request: NodeRequest) -> Machine:
        try:
            return self.inner.create(request)
        except (InsufficientCapacityError, ConfigurationError):
            raise
        except BaseException:
            self.adoption.mark_due()
            raise

    def delete(self, provider_id: str) -> None:
        try:
            self.inner.delete(provider_id)
        except BaseException:
            self.adoption.mark_due()
            raise

    def get(self, provider_id: str) -> Machine:
        return self.inner.get(provider_id)

    def list(self) -> MachineList:
        return self.inner.list()


__all__ = ["SETTLE_SECONDS", "Adoption", "AdoptionResult", "Outcome"]
