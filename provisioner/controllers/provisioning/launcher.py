"""Launching planned nodes: create the instance and its Node, roll back, report an outcome.

:meth:`Launcher.submit` starts the launches of one solve on a pool of ``launch_parallelism``
threads shared by every round (launches of overlapping rounds run side by side, never more
than that many at once) and returns one future :class:`LaunchOutcome` per planned node, in
plan order (:meth:`Launcher.launch` waits for them). A launch thread reads only its own
arguments and touches no round state: the round merges the outcomes on its own thread (limit
reservations, back-off, nominations memory, events), so nothing a round counts can be lost
to a concurrent update.

* The Node is created right after the instance, carrying the nominations of the pods it was
  launched for. A retried request that returns the instance launched before finds its Node
  already there (same providerID) and takes it.
* A launch whose Node cannot be created is not leaked. When the API server was unavailable or
  asked for a slower pace (a transient error) and adoption is wired (``leave_for_adoption``),
  the instance is kept: its tags are the launch record, and the next round's adoption pass
  writes its Node, so the capacity paid for is used. Otherwise (the API refused the Node for
  good, or nothing adopts) the instance is terminated at once: the garbage collector would find
  it later, but an orphan costs money until then.
* A launch none of whose pods still awaits capacity when its turn comes (kube-scheduler placed
  them in room that appeared since the plan, or they were deleted) is not made: no instance, no
  idle node. One with some of its pods left is made for those (see :class:`Launcher`).
* Insufficient capacity (Karpenter's ICE handling): the outcome names the offerings that had
  none (:attr:`LaunchOutcome.unavailable`); the round marks them unavailable and solves the
  same pods again.
* Other launch errors back off per Provisioner (:class:`Backoff`: exponential, capped).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from provisioner import metrics
from provisioner.clock import Clock
from provisioner.cloudprovider.types import (
    CloudProvider,
    CloudProviderError,
    InsufficientCapacityError,
    Machine,
    NodeRequest,
)
from provisioner.controllers.provisioning.nodes import node_manifest
from provisioner.kube.api import AlreadyExistsError, ApiError, KubeAPI, Object
from provisioner.model import nominations as nom
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.solver import PlannedNode
from provisioner.settings import ProvisioningSettings

log = logging.getLogger(__name__)

#: An offering: (instance type name, zone, capacity type).
Offering = tuple[str, str, str]


class LaunchStatus(enum.Enum):
    """How one launch ended."""

    #: The instance runs and its Node exists.
    LAUNCHED = "launched"
    #: No requested offering had capacity: solve again without the offerings named.
    INSUFFICIENT_CAPACITY = "insufficient_capacity"
    #: The cloud refused, or the Node could not be created (the instance was terminated, or kept
    #: for adoption after a transient API error): back off.
    FAILED = "failed"
    #: Not launched: every pod it was planned for was bound elsewhere or deleted before its turn.
    NOT_NEEDED = "not_needed"


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """What one launch did, for the round to merge.

    ``machine``: the instance when one was launched (also for a ``FAILED`` launch whose Node
    could not be created: it was terminated, or kept for adoption). ``launched_type``: its instance type among the
    request's options (``None`` when the cloud launched one it did not offer). ``node``: the
    Node as the API server answered (``LAUNCHED`` only). ``error``: why it did not launch.
    """

    planned: PlannedNode
    request: NodeRequest
    status: LaunchStatus
    machine: Machine | None = None
    launched_type: InstanceType | None = None
    node: Object | None = None
    error: BaseException | None = None

    @property
    def unavailable(self) -> frozenset[Offering]:
        """The offerings to mark unavailable after insufficient capacity (empty for other outcomes).

        The ones the cloud named, else every offering the request allowed.
        """
        if self.status is not LaunchStatus.INSUFFICIENT_CAPACITY:
            return frozenset()
        if isinstance(self.error, InsufficientCapacityError) and self.error.offerings:
            return frozenset(self.error.offerings)
        return frozenset(
            (it.name, o.zone, o.capacity_type)
            for it in self.request.instance_type_options
            for o in it.available_offerings(self.request.requirements)
        )


@dataclass(frozen=True, slots=True)
class LaunchJob:
    """One planned node to launch: the request, whether its pods are nominated, the Provisioner's UID."""

    planned: PlannedNode
    request: NodeRequest
    nominate: bool
    provisioner_uid: str


@dataclass
class _BackoffState:
    failures: int = 0
    until: float = 0.0


class Backoff:
    """Per-Provisioner back-off after launch errors (monotonic seconds; thread-safe).

    Each failure doubles the delay from ``base_seconds`` up to ``max_seconds``; a successful
    launch resets it.
    """

    def __init__(self, clock: Clock, base_seconds: float, max_seconds: float) -> None:
        self.clock = clock
        self.base_seconds = base_seconds
        self.max_seconds = max_seconds
        self._lock = threading.Lock()
        self._state: dict[str, _BackoffState] = {}

    def remaining(self, provisioner: str) -> float:
        """Seconds until ``provisioner`` may launch again (0: it may now)."""
        now = self.clock.monotonic()
        with self._lock:
            state = self._state.get(provisioner)
            return max(0.0, state.until - now) if state is not None else 0.0

    def failed(self, provisioner: str) -> float:
        """Count a launch error of ``provisioner``; returns the delay (seconds) before it launches again."""
        with self._lock:
            state = self._state.setdefault(provisioner, _BackoffState())
            state.failures += 1
            delay: float = min(self.max_seconds, self.base_seconds * 2 ** min(state.failures - 1, 20))
            state.until = self.clock.monotonic() + delay
        return delay

    def succeeded(self, provisioner: str) -> None:
        """``provisioner`` launched: its back-off ends."""
        with self._lock:
            self._state.pop(provisioner, None)

    def ends(self) -> list[float]:
        """Seconds until each running back-off ends (for the loop's next wake-up)."""
        now = self.clock.monotonic()
        with self._lock:
            return [s.until - now for s in self._state.values() if s.until > now]


class Launcher:
    """Launches planned nodes through the cloud provider and creates their Nodes (see the module docstring).

    ``awaits_capacity(pod_uid)``: whether a pod still awaits the capacity planned for it, read
    from the cluster state cache just before a launch of a provisioning round (whose pods are
    nominated). A launch runs up to a minute after its plan when many are queued, and its pods
    are not held by a nomination until its Node exists: meanwhile kube-scheduler may place them
    in room that appeared since (a node launched for other pods of the same burst). The launch
    is then made only for the pods still waiting, or not at all. None: launch as planned.

    ``leave_for_adoption()``: called when an instance is kept after its Node could not be
    written for a transient reason, so that adoption looks for it in the next rounds
    (:meth:`provisioner.controllers.provisioning.adoption.Adoption.mark_due`). None: such an
    instance is terminated like any other whose Node could not be written.
    """

    def __init__(
        self,
        api: KubeAPI,
        cloud: CloudProvider,
        clock: Clock,
        settings: ProvisioningSettings,
        awaits_capacity: Callable[[str], bool] | None = None,
        leave_for_adoption: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.awaits_capacity = awaits_capacity
        self.leave_for_adoption = leave_for_adoption
        self.cloud = cloud
        self.clock = clock
        self.settings = settings
        self.backoff = Backoff(clock, settings.backoff_base_seconds, settings.backoff_max_seconds)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, settings.launch_parallelism), thread_name_prefix="launch"
        )

    def submit(self, jobs: Sequence[LaunchJob]) -> list[Future[LaunchOutcome]]:
        """Start every job on the launch pool; one future outcome per job, in the order given.

        A future never raises: every error of a launch is its outcome's. Raises RuntimeError
        after :meth:`shutdown`.
        """
        return [self._pool.submit(self._guarded, job) for job in jobs]

    def launch(self, jobs: Sequence[LaunchJob]) -> list[LaunchOutcome]:
        """Launch every job concurrently and wait; one outcome per job, in the order given."""
        return [future.result() for future in self.submit(jobs)]

    def shutdown(self) -> None:
        """Stop taking launches (running ones finish)."""
        self._pool.shutdown(wait=False)

    def nomination_deadline(self) -> float:
        """Clock wall time a new node's nominations hold until: registration timeout + nomination TTL."""
        return (
            self.clock.now()
            + self.settings.nodes.registration_timeout_seconds
            + self.settings.nodes.nomination_ttl_seconds
        )

    def _guarded(self, job: LaunchJob) -> LaunchOutcome:
        """:meth:`_launch`, with an unexpected error (a bug) as a failed outcome: a round must always get one."""
        try:
            return self._launch(job)
        except Exception as exc:
            log.exception("Launch failed unexpectedly")
            return LaunchOutcome(job.planned, job.request, LaunchStatus.FAILED, error=exc)

    def _launch(self, job: LaunchJob) -> LaunchOutcome:
        """Launch one planned node and create its Node (runs on a launch thread)."""
        planned, request = job.planned, job.request
        if job.nominate and self.awaits_capacity is not None:
            waiting = tuple(pod for pod in planned.pods if self.awaits_capacity(pod.uid))
            if not waiting:
                return LaunchOutcome(planned, request, LaunchStatus.NOT_NEEDED)
            if len(waiting) < len(planned.pods):
                planned = replace(planned, pods=waiting)
        try:
            with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="create"):
                machine = self.cloud.create(request)
        except InsufficientCapacityError as exc:
            return LaunchOutcome(planned, request, LaunchStatus.INSUFFICIENT_CAPACITY, error=exc)
        except CloudProviderError as exc:
            return LaunchOutcome(planned, request, LaunchStatus.FAILED, error=exc)
        except Exception as exc:  # an unexpected provider bug must not kill the loop
            log.exception("Launch failed unexpectedly")
            return LaunchOutcome(planned, request, LaunchStatus.FAILED, error=exc)
        launched_type = next((t for t in request.instance_type_options if t.name == machine.instance_type), None)
        node = self._create_node(job, planned, machine, launched_type)
        if isinstance(node, BaseException):
            return LaunchOutcome(planned, request, LaunchStatus.FAILED, machine, launched_type, error=node)
        return LaunchOutcome(planned, request, LaunchStatus.LAUNCHED, machine, launched_type, node)

    def _create_node(
        self, job: LaunchJob, planned: PlannedNode, machine: Machine, launched_type: InstanceType | None
    ) -> Object | BaseException:
        """The Node of a launched instance, or why it could not be created.

        The instance is then left for adoption after a transient error when adoption is wired,
        else terminated.
        """
        provisioner = job.request.provisioner
        deadline = self.nomination_deadline()
        nominations = nom.EMPTY
        if job.nominate:
            for pod in planned.pods:
                nominations = nom.nominate(nominations, pod.uid, pod.key, pod.requests, deadline)
        manifest = node_manifest(
            provisioner=provisioner,
            provisioner_uid=job.provisioner_uid,
            machine=machine,
            instance_type=launched_type,
            planned_labels=planned.labels,
            planned_taints=planned.taints,
            nominations=nom.encode(nominations) if nominations.pods else None,
            extra_labels=self.settings.nodes.labels,
            extra_annotations=self.settings.nodes.annotations,
        )
        try:
            return self.api.create("Node", manifest)
        except AlreadyExistsError:
            # a retried request returned the instance we launched before: the Node is ours
            try:
                existing = self.api.get("Node", machine.name)
            except ApiError:
                existing = None
            if existing is not None and (existing.get("spec") or {}).get("providerID") == machine.provider_id:
                return existing
            error: BaseException = AlreadyExistsError(f"node {machine.name} exists with another providerID")
        except ApiError as exc:
            error = exc
            if exc.transient and self.leave_for_adoption is not None:
                log.warning(
                    "Could not create node %s for instance %s: %s; keeping the instance for adoption",
                    machine.name,
                    machine.instance_id,
                    exc,
                    extra={"provisioner": provisioner.name},
                )
                self.leave_for_adoption()
                return error
        log.error(
            "Could not create node %s for instance %s: %s; terminating the instance",
            machine.name,
            machine.instance_id,
            error,
            extra={"provisioner": provisioner.name},
        )
        try:
            self.cloud.delete(machine.provider_id)
        except CloudProviderError as exc:
            log.error(
                "Could not terminate instance %s (garbage collection will): %s", machine.instance_id, exc
            )
        return error

