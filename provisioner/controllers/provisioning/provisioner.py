"""A provisioning round: snapshot -> results -> launched and nominated nodes (Karpenter's ``provisioner.go``).

One round (:meth:`NodeProvisioner.begin` / :meth:`NodeProvisioner.provision` for pending pods,
:meth:`NodeProvisioner.replace` for an expiring node's pods) takes the cluster snapshot (after
:meth:`NodeProvisioner.provisionable` released what it shows from the ledger and pruned ended
nominations) and:

1. builds the solver input (:func:`provisioner.state.solverinput.build_solver_input` over the
   cache's node views, with the ledger's writes and promised room:
   :class:`~provisioner.controllers.provisioning.inputs.SolverInputs`; pods, Provisioners,
   instance types, existing and in-flight nodes, DaemonSets, limit usage);
2. :meth:`~NodeProvisioner.schedule`: solves (pure :func:`provisioner.scheduling.solver.solve`)
   and checks each planned node against back-off and limits, giving :class:`Results`;
3. :meth:`~NodeProvisioner.record`: writes the nominations of pods placed on in-flight nodes
   (:class:`~provisioner.controllers.provisioning.nominations.NodeNominations`: one patch per
   node, the nodes written concurrently) and their events (as Karpenter's ``Results.Record``);
4. launches the planned nodes (:class:`~provisioner.controllers.provisioning.launcher.Launcher`)
   and merges the outcomes on the round's thread: limit usage, back-off, the in-flight ledger,
   ``Launched`` / ``Nominated`` / ``LaunchFailed`` / ``InsufficientCapacity`` events;
5. after insufficient capacity, solves the same pods again without the failed offerings, up to
   ``ice_retries`` times.

Steps 1-3 and the start of the launches (the *solve*) run under :attr:`NodeProvisioner.solving`,
one solve at a time; the launches and the merging of their outcomes (steps 4-5, the *finish*)
run on a round thread of their own, so the next batch is solved while a round's launches run
(Karpenter creates its NodeClaims and launches them asynchronously the same way). What a
later solve must see of a round still launching is in the ledger when the solve ends: its pods
are covered (launching) and its launches' room is reserved against limits, so rounds that
overlap launch nothing twice and never overshoot a limit. An ICE retry is a solve again (under
the lock, over a fresh snapshot). At most ``rounds`` finishes run at once; more wait.

Decisions and their sources:

* In-flight awareness (Karpenter v0.10+): nodes already launched count as capacity, with what
  their nominated pods still need set aside, so a second burst that fits launches nothing; a
  pod placed on an in-flight node is added to its nominations. Pods holding a valid nomination
  are not provisionable; a nomination is valid only while the pod still fits beside the pods
  bound to the node (kube-scheduler may bind others there first), else it ends and the pod
  gets a new node (see :func:`provisioner.model.nominations.displaced`). What
  the cache does not show yet lives in the
  :class:`~provisioner.state.inflight.InFlightLedger`, so nothing is launched twice for one
  pod. Node requests carry a stable id (Provisioner + pod UIDs) so a retried launch is
  idempotent at the cloud too.
* Limits are enforced twice: by the solver while packing, and before each launch against the
  capacity of the Provisioner's nodes (existing, in flight, launched in this round), dropping
  instance type options that would overshoot (Karpenter v0.6.3 checked once per packing and
  could overshoot; we do not). A launch reserves its largest option until its outcome says
  which type it was.
* Replacement capacity (the expiration controller's ``Replacer``): the room each target node
  was chosen for is promised to the expiring node's pods until they leave it, so nodes
  expiring together each get their own; a replacement fails (the node is kept) when any pod
  got no capacity.
* Events: ``Nominated`` on each pod, ``Launched`` on the Provisioner, ``FailedProvisioning``
  (Warning) on a pod no Provisioner can serve; log lines as the walkthrough shows them.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock
from provisioner.cloudprovider.types import Machine, NodeRequest
from provisioner.controllers.provisioning.events import provisioner_event
from provisioner.controllers.provisioning.inputs import SolverInputs
from provisioner.controllers.provisioning.launcher import (
    Launcher,
    LaunchJob,
    LaunchOutcome,
    LaunchStatus,
    Offering,
)
from provisioner.controllers.provisioning.nodes import node_request, node_request_id
from provisioner.controllers.provisioning.nominations import NodeNominations
from provisioner.kube.api import KubeAPI, Object
from provisioner.kube.events import EventRecorder
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.quantity import format_quantity
from provisioner.model.resources import Resources
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import Pod, pod_requests
from provisioner.scheduling.provisioners import provisioner_limits
from provisioner.scheduling.solver import Plan, PlannedNode, SolverInput
from provisioner.settings import ProvisioningSettings
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger
from provisioner.state.nodes import StateNode
from provisioner.state.solverinput import DECODE_ERRORS, ReadPods, active_provisioners, read_pods

log = logging.getLogger(__name__)

#: Node request ids of one relaunch chain tried at most (:meth:`NodeProvisioner._unused_request_id`).
MAX_RELAUNCHES = 16


@dataclass(frozen=True)
class LaunchedNode:
    """One node launched: its Node name, the machine, the pods nominated to it."""

    name: str
    provisioner: str
    machine: Machine
    pod_uids: tuple[str, ...]


@dataclass(frozen=True)
class ProvisionResult:
    """What one provisioning round did.

    ``nodes``: names of the Nodes created (launch order). ``nominated_existing``: node name ->
    pod UIDs added to an in-flight node's nominations. ``placed_existing``: node name -> pod
    UIDs the solver placed on existing capacity (in flight or Ready). ``unschedulable``: pod
    key (``ns/name``) -> reason no Provisioner could serve it. ``failed``: pod key -> why its
    launch failed (limits, back-off, cloud errors). ``pods``: how many pods were considered.
    """

    nodes: tuple[str, ...] = ()
    launched: tuple[LaunchedNode, ...] = ()
    nominated_existing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    placed_existing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unschedulable: Mapping[str, str] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    pods: int = 0


class ReplacementError(RuntimeError):
    """Some pods of an expiring node could not get replacement capacity now (limits, back-off, cloud errors)."""


def replacement_nodes(result: ProvisionResult, exclude: str) -> list[str]:
    """The nodes an expiring node ``exclude`` must wait for, from a replacement round's result (sorted).

    Launched nodes (``nodes``), in-flight nodes the pods were nominated to
    (``nominated_existing``) and existing nodes the solver placed them on (``placed_existing``);
    the expiring node itself never. Raises ReplacementError when some pod got no capacity:
    the solver placed it nowhere (``unschedulable``: limits, no Provisioner or offering fits)
    or its launch failed (``failed``: limits, back-off, cloud errors); the expiration
    controller then keeps the node and retries later, so nothing is drained without somewhere
    to go (docs/troubleshooting.md, ``ReplacementFailed``).
    """
    problems = {**result.unschedulable, **result.failed}
    if problems:
        first = sorted(problems.items())[0]
        raise ReplacementError(f"{len(problems)} pod(s) without replacement capacity, e.g. {first[0]}: {first[1]}")
    if exclude in result.nodes:
        log.warning("Provisioning answered with expiring node %s itself (a reused node request id); "
                    "not waiting for a replacement", exclude)
    names = [*result.nodes, *result.nominated_existing, *result.placed_existing]
    return sorted({n for n in names if n and n != exclude})


class RoundPurpose(enum.Enum):
    """What a round provisions for."""

    #: Pending pods: they are nominated to their nodes; a pod no Provisioner can serve gets a
    #: ``FailedProvisioning`` event.
    PENDING = "pending"
    #: An expiring node's pods, still bound to it: no nominations (their owner recreates them
    #: with new UIDs) and no events on them.
    REPLACEMENT = "replacement"


@dataclass
class _Round:
    """Bookkeeping of one provisioning round.

    Written by its solve (under the solving lock), then by its finish on one round thread (which
    starts after the solve, and solves again for ICE retries under the lock): never by two
    threads at once. ``usage``: limits usage of the current solve. ``offered``: the Provisioners
    whose instance types the first solve had. ``reservations``: the ids of the launches that
    reserved room against limits (released at the end, whichever the outcome).
    """

    snapshot: Snapshot
    usage: dict[str, Resources]
    exclude: frozenset[str]
    pod_objects: dict[str, Object]
    started: float = 0.0
    pods: tuple[Pod, ...] = ()
    provisioners: Mapping[str, Provisioner] = field(default_factory=dict)
    offered: tuple[str, ...] = ()
    reservations: set[str] = field(default_factory=set)
    launched: list[LaunchedNode] = field(default_factory=list)
    nominated_existing: dict[str, list[str]] = field(default_factory=dict)
    placed_existing: dict[str, list[str]] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    unavailable: set[Offering] = field(default_factory=set)
    purpose: RoundPurpose = RoundPurpose.PENDING
    #: Applied to each plan before its launches (a replacement round's narrowing of options).
    adjust: Callable[[Plan], Plan] | None = None
    #: Node request id -> the view of the Node launched for it (:meth:`NodeProvisioner._unused_request_id`).
    request_nodes: dict[str, StateNode] | None = None

    @property
    def nominate(self) -> bool:
        """Whether the round's pods are nominated to the nodes found for them."""
        return self.purpose is RoundPurpose.PENDING


@dataclass(frozen=True)
class Results:
    """What one solve decided, after the back-off and limits checks.

    ``plan``: the solver's answer. ``nodes``: the existing and in-flight nodes it was given, by
    name. ``launches``: the planned nodes that may launch now (the others' pods are in the
    round's ``failed``).
    """

    plan: Plan
    nodes: Mapping[str, ClusterNode]
    launches: tuple[LaunchJob, ...]


#: A solve's launches: each job with its future outcome, in plan order.
_Launches = list[tuple[LaunchJob, "Future[LaunchOutcome]"]]


def format_duration(seconds: float) -> str:
    """Seconds as the log lines show them: ``0.512s``, ``12.3s``."""
    return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.1f}s"


def _done(result: ProvisionResult) -> Future[ProvisionResult]:
    future: Future[ProvisionResult] = Future()
    future.set_result(result)
    return future


class NodeProvisioner:
    """Turns a snapshot's pods into launched, nominated nodes. See the module docstring.

    :attr:`solving` (re-entrant) is held by every solve; the caller holds it too from its
    snapshot to :meth:`begin`'s return, so that no other solve runs between the snapshot and
    the moment this round's pods are covered. Launches run on the launcher's threads, which
    never see the round's bookkeeping; each round's finish runs on one of ``rounds`` round
    threads. ``snapshot``: takes a fresh snapshot for ICE retries (default: the round's own).
    """

    def __init__(
        self,
        api: KubeAPI,
        clock: Clock,
        recorder: EventRecorder,
        settings: ProvisioningSettings,
        ledger: InFlightLedger,
        inputs: SolverInputs,
        launcher: Launcher,
        solver: Callable[[SolverInput], Plan],
        *,
        snapshot: Callable[[], Snapshot] | None = None,
        rounds: int = 16,
    ) -> None:
        self.api = api
        self.clock = clock
        self.recorder = recorder
        self.settings = settings
        self.ledger = ledger
        self.inputs = inputs
        self.launcher = launcher
        self.solver = solver
        self.nominations = NodeNominations(api, clock, ledger, inputs)
        self.solving = threading.RLock()
        self._snapshot = snapshot
        self._finishes = ThreadPoolExecutor(max_workers=max(1, rounds), thread_name_prefix="round")

    def shutdown(self) -> None:
        """Stop taking rounds (running ones finish) and nomination writes (queued ones still run)."""
        self._finishes.shutdown(wait=False)
        self.nominations.shutdown()

    # ------------------------------------------------------------------ rounds
    def provisionable(self, snapshot: Snapshot) -> list[Object]:
        """Release what ``snapshot`` shows, prune ended nominations (written in the background), return the provisionable pods."""
        self.ledger.release(snapshot, self.clock.now())
        self.nominations.prune(snapshot)
        return self.inputs.provisionable(snapshot)

    def provision(self, snapshot: Snapshot, pods: Sequence[Object]) -> ProvisionResult:
        """:meth:`begin`, then wait for the round to end."""
        return self.begin(snapshot, pods).result()

    def begin(self, snapshot: Snapshot, pods: Sequence[Object]) -> Future[ProvisionResult]:
        """Solve for ``pods`` (from :meth:`provisionable`) now and launch in the background.

        Returns when the solve is done and its launches started (the pods are covered from
        then on); the future ends with the round: every launch merged, ICE retries done, pods
        no Provisioner serves warned about.
        """
        if not pods:
            self.inputs.warm(snapshot)
            return _done(ProvisionResult())
        with self.solving:
            started = self._start(snapshot, pods, frozenset(), RoundPurpose.PENDING)
        if isinstance(started, ProvisionResult):
            return _done(started)
        round_, launches = started
        return self._finishes.submit(self._finish, round_, launches)

    def replace(self, snapshot: Snapshot, pods: Sequence[Object], node_name: str) -> list[str]:
        """Capacity for an expiring node's ``pods`` anywhere but ``node_name``; the nodes to wait for.

        :meth:`replace_nodes` for one node.
        """
        return self.replace_nodes(snapshot, {node_name: pods})

    def replace_nodes(self, snapshot: Snapshot, pods_by_node: Mapping[str, Sequence[Object]],
                      adjust: Callable[[Plan], Plan] | None = None) -> list[str]:
        """Capacity for the pods of nodes going away (node name -> its pods), solved together, anywhere but those nodes.

        The pods (wire-form, bound to their nodes) are solved as if pending (their
        ``nodeName`` is ignored; DaemonSet and static pods are left out: their controller puts
        them on every node); placements on existing capacity launch nothing. The room each
        target node was chosen for is promised to each pod until it leaves its node (earlier
        promises to those nodes are withdrawn first: they were for these same pods).
        ``adjust``: applied to each plan of the round before its launches (consolidation narrows
        a spot replacement's options). Returns :func:`replacement_nodes` (none of the nodes going
        away); raises ReplacementError when some pod got no capacity.
        """
        self.ledger.release(snapshot, self.clock.now())
        pending = []
        for objs in pods_by_node.values():
            for obj in objs:
                if objects.controller_owner_kind(obj) in ("DaemonSet", "Node"):
                    continue  # their controller puts them on every node, the replacement included
                copy = dict(obj)
                spec = dict(copy.get("spec") or {})
                spec.pop("nodeName", None)
                copy["spec"] = spec
                status = dict(copy.get("status") or {})
                status.pop("nominatedNodeName", None)
                status["phase"] = "Pending"
                copy["status"] = status
                pending.append(copy)
        for name in pods_by_node:
            self.ledger.withdraw(name)
        exclude = frozenset(pods_by_node)
        with self.solving:  # held until the promise is recorded: no pending round plans into that room before
            started = self._start(snapshot, pending, exclude, RoundPurpose.REPLACEMENT, adjust)
            result = started if isinstance(started, ProvisionResult) else self._finish(*started)
        names: set[str] = set()
        for name in pods_by_node:
            names.update(replacement_nodes(result, name))
        for name, pods in pods_by_node.items():
            self._promise(name, pods, result)
        return sorted(names - exclude)

    def _start(
        self,
        snapshot: Snapshot,
        pod_objects: Sequence[Object],
        exclude: frozenset[str],
        purpose: RoundPurpose,
        adjust: Callable[[Plan], Plan] | None = None,
    ) -> ProvisionResult | tuple[_Round, _Launches]:
        """A round's first solve (under :attr:`solving`): its launches started, or the round's result when it launches nothing."""
        round_ = _Round(
            snapshot=snapshot,
            usage={},
            exclude=exclude,
            pod_objects={objects.uid(p): p for p in pod_objects},
            started=self.clock.monotonic(),
            purpose=purpose,
            adjust=adjust,
        )
        read = read_pods(snapshot, pod_objects)
        for refused in read.refused:
            round_.unschedulable[objects.key(refused.obj)] = f"the pod cannot be read: {refused.reason}"
        round_.pods = read.pods
        round_.provisioners = active_provisioners(snapshot)
        if not round_.pods:
            return self._result(round_, 0)
        if not round_.provisioners:
            for pod in round_.pods:
                round_.unschedulable[pod.key] = "no Provisioner exists"
            self._warn_unschedulable(round_)
            return self._result(round_, len(round_.pods))
        try:
            instance_types = self.inputs.instance_types(round_.provisioners, snapshot, round_.unavailable)
            round_.offered = tuple(instance_types)
            given = self.inputs.build(snapshot, ReadPods(read.pods), instance_types, round_.provisioners, exclude).input
            return round_, self._solve(given, round_, attempt=0)
        except BaseException:
            self._end(round_)
            raise

    def _solve(self, given: SolverInput, round_: _Round, attempt: int) -> _Launches:
        """Solve ``given``, record its placements on existing capacity and start its launches (under :attr:`solving`).

        The limits usage is ``given``'s (every node, and every launch still running in any
        round); each launch reserves its room in the ledger before it starts, and its pods are
        covered from then on.
        """
        with self.solving:
            round_.usage = dict(given.provisioner_usage)
            results = self.schedule(given, round_.provisioners, round_, attempt)
            self.record(results, round_)
            if round_.nominate:  # covered from now on: the launches are in flight
                for job in results.launches:
                    self.ledger.launching((p.uid for p in job.planned.pods), self.launcher.nomination_deadline())
            return list(zip(results.launches, self.launcher.submit(results.launches), strict=True))

    def _finish(self, round_: _Round, launches: _Launches) -> ProvisionResult:
        """Merge each launch's outcome in plan order, solve again after insufficient capacity; the round's result."""
        try:
            attempt = 0
            while launches:
                retry: list[Pod] = []
                for _, future in launches:
                    outcome = future.result()
                    self._merge(outcome, round_)
                    if outcome.status is LaunchStatus.INSUFFICIENT_CAPACITY:
                        retry.extend(outcome.planned.pods)
                        round_.unavailable.update(outcome.unavailable)
                launches = self._retry(retry, round_, attempt + 1) if retry else []
                attempt += 1
        finally:
            self._end(round_)
        self._warn_unschedulable(round_)
        result = self._result(round_, len(round_.pods))
        log.info(
            "Round of %d pod(s) done in %s: %d node(s) launched, %d pod(s) placed on existing nodes, %d failed, "
            "%d unschedulable",
            result.pods, format_duration(self.clock.monotonic() - round_.started), len(result.launched),
            sum(len(uids) for uids in result.placed_existing.values()), len(result.failed), len(result.unschedulable),
        )
        return result

    def _retry(self, pods: Sequence[Pod], round_: _Round, attempt: int) -> _Launches:
        """Solve ``pods`` again without the offerings that had no capacity (a fresh snapshot); none after ``ice_retries``."""
        if attempt > self.settings.ice_retries:
            for pod in pods:
                round_.failed[pod.key] = "insufficient capacity in every allowed offering"
            return []
        log.info("Retrying %d pod(s) with the remaining offerings after insufficient capacity", len(pods))
        with self.solving:
            # the round's own snapshot may miss Nodes that a later round's snapshot released from the ledger
            if self._snapshot is not None:
                round_.snapshot = self._snapshot()
            offered = {name: round_.provisioners[name] for name in round_.offered}
            fresh = self.inputs.instance_types(offered, round_.snapshot, round_.unavailable)
            again = self.inputs.build(round_.snapshot, ReadPods(tuple(pods)), fresh, round_.provisioners, round_.exclude)
            return self._solve(again.input, round_, attempt)

    def _end(self, round_: _Round) -> None:
        """The round is over: its pods still launching are not covered, its reservations are free."""
        # launches that ended without a node for their pods (errors, limits): not covered
        self.ledger.end_launches(pod.uid for pod in round_.pods)
        self.ledger.unreserve(round_.reservations)

    @staticmethod
    def _result(round_: _Round, n: int) -> ProvisionResult:
        return ProvisionResult(
            nodes=tuple(node.name for node in round_.launched),
            launched=tuple(round_.launched),
            nominated_existing={k: tuple(v) for k, v in round_.nominated_existing.items()},
            placed_existing={k: tuple(v) for k, v in round_.placed_existing.items()},
            unschedulable=dict(round_.unschedulable),
            failed=dict(round_.failed),
            pods=n,
        )

    # ------------------------------------------------------------------ schedule
    def schedule(
        self, given: SolverInput, provisioners: Mapping[str, Provisioner], round_: _Round, attempt: int
    ) -> Results:
        """Solve ``given`` against the round's limit usage, then check each planned node against back-off and limits.

        The round's usage (``round_.usage``: the cluster's, plus the room of the nodes launched
        in this round) replaces ``given``'s; each planned node that may launch reserves its room there.
        """
        nodes = given.nodes
        with metrics.time_call(metrics.SOLVE_DURATION):
            plan = self.solver(replace(given, provisioner_usage=round_.usage))
        if round_.adjust is not None:
            plan = round_.adjust(plan)
        for error in plan.unschedulable:
            round_.unschedulable[error.pod.key] = error.reason
        if plan.new_nodes:
            self._log_packing(plan.new_nodes)
        launches = []
        for planned in plan.new_nodes:
            provisioner = provisioners[planned.provisioner]
            request = self._request(planned, provisioner, round_, attempt)
            if request is None:
                continue
            prov_obj = round_.snapshot.provisioner_objects.get(provisioner.name) or {}
            uid = str((prov_obj.get("metadata") or {}).get("uid") or provisioner.uid or "")
            launches.append(LaunchJob(planned, request, round_.nominate, uid))
        return Results(plan=plan, nodes={n.name: n for n in nodes}, launches=tuple(launches))

    def _log_packing(self, planned: Sequence[PlannedNode]) -> None:
        groups: dict[tuple[str, tuple[str, ...]], list[PlannedNode]] = {}
        for node in planned:
            groups.setdefault(
                (node.provisioner, tuple(t.name for t in node.instance_type_options)), []
            ).append(node)
        for (provisioner, options), members in groups.items():
            log.info(
                "Computed packing of %d node(s) for %d pod(s) with instance type option(s) [%s]",
                len(members),
                sum(len(m.pods) for m in members),
                " ".join(options),
                extra={"provisioner": provisioner},
            )

    def _request(
        self, planned: PlannedNode, provisioner: Provisioner, round_: _Round, attempt: int
    ) -> NodeRequest | None:
        """The node request, after the back-off and limits checks (None: not launched now)."""
        backing_off = self.launcher.backoff.remaining(provisioner.name)
        if backing_off > 0:
            reason = f"Provisioner {provisioner.name} is backing off after launch errors for {backing_off:.0f}s"
            for pod in planned.pods:
                round_.failed[pod.key] = reason
            return None
        options = list(planned.instance_type_options)
        try:
            limits = provisioner_limits(provisioner)
        except ValueError as exc:
            limits = None
            log.warning("%s", exc)
        if limits is not None:
            usage = round_.usage.get(provisioner.name, Resources())
            over = [r for r in limits if usage.get(r) >= limits.get(r)]
            if over:
                r = over[0]
                reason = (
                    f"{r} resource usage of {format_quantity(r, usage.get(r))} "
                    f"exceeds limit of {format_quantity(r, limits.get(r))}"
                )
                self._limit_exceeded(provisioner, planned, reason, round_)
                return None
            headroom = {r: limits.get(r) - usage.get(r) for r in limits}
            options = [t for t in options if all(t.capacity.get(r) <= headroom[r] for r in limits)]
            if not options:
                reason = "every instance type option would exceed the limits " + ", ".join(
                    f"{r}={format_quantity(r, limits.get(r))}" for r in limits
                )
                self._limit_exceeded(provisioner, planned, reason, round_)
                return None
            # reserve the largest remaining option until the launch says which one it was
            largest = Resources({r: max(t.capacity.get(r) for t in options) for r in limits})
            round_.usage[provisioner.name] = usage + largest
        else:
            largest = None
        salt = "replace:" + ",".join(sorted(round_.exclude)) if round_.exclude else ""
        displaced_from = self.ledger.displaced_from(p.uid for p in planned.pods)
        if displaced_from:  # a new node, not the full one launched for these pods before
            salt += "|displaced:" + ",".join(displaced_from)
        request_id = node_request_id(provisioner, (p.uid for p in planned.pods), attempt, salt=salt)
        if round_.nominate:
            request_id = self._unused_request_id(request_id, planned, provisioner, attempt, salt, round_)
        request = node_request(provisioner, planned, request_id, self.settings.nodes.labels, options)
        if largest is not None:  # until its Node is written (then its capacity counts) or it fails
            self.ledger.reserve(request.id, provisioner.name, largest)
            round_.reservations.add(request.id)
        return request

    def _unused_request_id(self, request_id: str, planned: PlannedNode, provisioner: Provisioner, attempt: int,
                           salt: str, round_: _Round) -> str:
        """``request_id``, or the first id of its relaunch chain whose Node could still take the pods (pending rounds ask).

        A request id is stable for its Provisioner and pods (:func:`node_request_id`), and the
        cloud provider answers a request it has seen with the instance it launched then (EC2's
        ``ClientToken``, the kwok provider's Node names); the launcher then takes that Node as
        the launch's. That is right while the Node has room for the pods beside its bound pods
        and the nominations it holds for others (a launch retried after a restart, a Node
        adopted from its instance's tags), and wrong once others filled it after these pods'
        nominations there ended: the pods would be recorded on their way to a full node. Such
        a request is salted with the id before it (``relaunch:<id>``), so the chain depends on
        the Nodes alone: pods planned a third time skip both full nodes. Nodes being deleted do
        not count (the providers launch anew for an id whose instance is going). Read from the
        round's node views (the cache's, with our own writes), indexed once per round by their
        ``groupless.dev/node-request`` annotation (a label on kwok's Nodes); at most
        :data:`MAX_RELAUNCHES` steps.
        """
        if round_.request_nodes is None:
            round_.request_nodes = {
                request: view for view in self.inputs.nodes(round_.snapshot).values()
                if not view.deleting and (request := view.labels.get(wk.NODE_REQUEST_TAG)
                                          or objects.annotations_of(view.node).get(wk.NODE_REQUEST_TAG))
            }
        wanted = Resources.sum(nom.with_pod_slot(p.requests) for p in planned.pods)
        now = self.clock.now()
        for _ in range(MAX_RELAUNCHES):
            earlier = round_.request_nodes.get(request_id)
            if earlier is None:
                break
            others = nom.reserved(earlier.held(round_.snapshot.pods, now))
            if wanted.fits(earlier.allocatable - earlier.requested - others):
                break  # the provider's instance for this id can still take the pods
            log.info("Node %s was launched for the same pods before and has no room for them now; launching anew",
                     earlier.name, extra={"provisioner": provisioner.name})
            request_id = node_request_id(provisioner, (p.uid for p in planned.pods), attempt,
                                         salt=salt + "|relaunch:" + request_id)
        return request_id

    def _limit_exceeded(
        self, provisioner: Provisioner, planned: PlannedNode, reason: str, round_: _Round
    ) -> None:
        message = f"Could not launch node, {reason}"
        log.warning("%s", message, extra={"provisioner": provisioner.name})
        metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type="limits_exceeded").inc()
        provisioner_event(self.recorder, provisioner.name, round_.snapshot, "Warning", "LimitExceeded", message)
        for pod in planned.pods:
            round_.failed[pod.key] = message

    # ------------------------------------------------------------------ record
    def record(self, results: Results, round_: _Round) -> None:
        """Record what the solve placed on existing capacity (as Karpenter's ``Results.Record``).

        Every placement joins the round's ``placed_existing``, and its node counts as nominated
        for the nomination window (:meth:`InFlightLedger.placed`; Karpenter's
        ``NominateNodeForPod``); pods placed on an in-flight node of ours are added to its
        nominations (one patch per node), covered in the ledger, and get a ``Nominated`` event.
        New nodes' nominations travel with their Node (:meth:`_merge`).
        """
        nominate: dict[str, list[Pod]] = {}
        for placement in results.plan.existing:
            uids = [p.uid for p in placement.pods]
            round_.placed_existing.setdefault(placement.node, []).extend(uids)
            node = results.nodes.get(placement.node)
            if round_.nominate and node is not None and node.in_flight and node.provisioner:
                nominate.setdefault(placement.node, []).extend(placement.pods)
        if round_.nominate and results.plan.existing:
            now = self.clock.now()
            self.ledger.placed((placement.node for placement in results.plan.existing), now,
                               now + self.settings.batching.nomination_window_seconds)
        if not nominate:
            return
        placements = list(nominate.items())
        written = self.nominations.add_all(placements, round_.snapshot, self.launcher.nomination_deadline())
        for (node_name, pods), obj in zip(placements, written, strict=True):
            if obj is not None:
                self._nominated_existing(node_name, obj, pods, round_)

    def _nominated_existing(self, node_name: str, node: Object, pods: Sequence[Pod], round_: _Round) -> None:
        """Pods the solver placed on an in-flight node of ours were added to its nominations: their events."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        where = f"{labels.get(wk.INSTANCE_TYPE, '?')}, {labels.get(wk.ZONE, '?')}"
        for pod in pods:
            round_.nominated_existing.setdefault(node_name, []).append(pod.uid)
            obj = round_.pod_objects.get(pod.uid)
            if obj is not None:
                self.recorder.normal(obj, "Nominated", f"Pod should schedule on node {node_name} ({where})")
        metrics.PODS_NOMINATED.labels(provisioner=str(labels.get(wk.PROVISIONER_NAME, ""))).inc(len(pods))

    def _warn_unschedulable(self, round_: _Round) -> None:
        """``FailedProvisioning`` on each pending pod no Provisioner can serve (replacement rounds: none)."""
        if round_.purpose is not RoundPurpose.PENDING:
            return
        by_key = {objects.key(obj): obj for obj in round_.pod_objects.values()}
        for key, reason in round_.unschedulable.items():
            obj = by_key.get(key)
            log.info("Unable to provision pod %s: %s", key, reason)
            if obj is not None:
                self.recorder.warning(
                    obj, "FailedProvisioning", f"No Provisioner can serve the pod: {reason}"
                )

    # ------------------------------------------------------------------ launch outcomes
    def _merge(self, outcome: LaunchOutcome, round_: _Round) -> None:
        """Fold one launch's outcome into the round (on the round's thread): usage, back-off, ledger, events."""
        planned, request = outcome.planned, outcome.request
        provisioner = request.provisioner
        if outcome.status is LaunchStatus.NOT_NEEDED:
            log.info("Not launching a node for %d pod(s): each was scheduled elsewhere or deleted since the plan",
                     len(planned.pods), extra={"provisioner": provisioner.name})
            return
        if outcome.machine is not None:  # an instance was launched (its Node may still have failed)
            self.launcher.backoff.succeeded(provisioner.name)
        if outcome.status is not LaunchStatus.LAUNCHED:
            self.ledger.unreserve((request.id,))  # nothing runs for it: its room is free
        if outcome.status is LaunchStatus.INSUFFICIENT_CAPACITY:
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type="insufficient_capacity").inc()
            log.warning(
                "Insufficient capacity for %s: %s",
                provisioner.name,
                outcome.error,
                extra={"provisioner": provisioner.name},
            )
            provisioner_event(
                self.recorder, provisioner.name, round_.snapshot, "Warning", "InsufficientCapacity", str(outcome.error)
            )
            return
        machine, node = outcome.machine, outcome.node
        if outcome.status is LaunchStatus.FAILED or machine is None or node is None:
            self._launch_failed(provisioner, planned, outcome.error, round_)
            return
        uids = tuple(p.uid for p in planned.pods)
        self.ledger.wrote(machine.name, node, uids if round_.nominate else (), self.launcher.nomination_deadline(),
                          settles=request.id)
        round_.launched.append(LaunchedNode(machine.name, provisioner.name, machine, uids))
        metrics.NODES_LAUNCHED.labels(
            provisioner=provisioner.name, capacity_type=machine.capacity_type, zone=machine.zone
        ).inc()
        where = f"{machine.instance_type}, {machine.zone}"
        if round_.nominate:
            metrics.PODS_NOMINATED.labels(provisioner=provisioner.name).inc(len(uids))
            for pod in planned.pods:
                obj = round_.pod_objects.get(pod.uid)
                if obj is not None:
                    self.recorder.normal(
                        obj, "Nominated", f"Pod should schedule on node {machine.name} ({where})"
                    )
        provisioner_event(
            self.recorder,
            provisioner.name,
            round_.snapshot,
            "Normal",
            "Launched",
            f"Launched node {machine.name} ({where}, {machine.capacity_type}) for {len(uids)} pod(s)",
        )

    def _launch_failed(
        self, provisioner: Provisioner, planned: PlannedNode, exc: BaseException | None, round_: _Round
    ) -> None:
        delay = self.launcher.backoff.failed(provisioner.name)
        metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type=metrics.outcome_of(exc)).inc()
        message = f"Could not launch node for {len(planned.pods)} pod(s): {exc}; retrying in {delay:.0f}s"
        log.error("%s", message, extra={"provisioner": provisioner.name})
        provisioner_event(self.recorder, provisioner.name, round_.snapshot, "Warning", "LaunchFailed", message)
        for pod in planned.pods:
            round_.failed[pod.key] = message

    # ------------------------------------------------------------------ replacement
    def _promise(self, node_name: str, pods: Sequence[Object], result: ProvisionResult) -> None:
        """Hold the room each target node was chosen for while ``node_name``'s pods wait to move.

        The old pods stay bound to the expiring node while it drains, and the replacement
        carries no nominations for them (their ReplicaSet recreates them with new UIDs), so
        without this the next expiring node's pods would be planned into the same free room.
        Each pod's room is held until it leaves the expiring node
        (:meth:`InFlightLedger.reserved <provisioner.state.inflight.InFlightLedger.reserved>`).
        """
        requests: dict[str, Resources] = {}
        for pod in pods:
            try:
                requests[objects.uid(pod)] = pod_requests(pod)
            except DECODE_ERRORS:
                continue
        targets: dict[str, tuple[str, ...]] = {n.name: n.pod_uids for n in result.launched}
        for target, uids in result.placed_existing.items():
            targets[target] = (*targets.get(target, ()), *uids)
        room = {target: {uid: requests[uid] for uid in uids if uid in requests} for target, uids in targets.items()}
        self.ledger.promise(node_name, room)
