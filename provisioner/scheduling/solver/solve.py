"""The solve loop and its public values (Karpenter's ``scheduler.go``).

:func:`solve` takes a :class:`SolverInput` and returns a :class:`Plan`; see the package
docstring (:mod:`provisioner.scheduling.solver`) for the algorithm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.api.types import Provisioner, Taint
from provisioner.model import labels as wk
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.model.resources import CPU, MEMORY, PODS, Resources
from provisioner.scheduling.instancetypes import InstanceType, Offering
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import Pod, tolerates_all
from provisioner.scheduling.solver.existing import ExistingFit, ExistingNode, existing_nodes
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.planned import PERMANENT, Candidate, OpenNode, open_node
from provisioner.scheduling.solver.preferences import (
    Alternative,
    Relaxation,
    held_pod_affinity,
    held_pod_anti_affinity,
    held_spread,
    requirement_alternatives,
)
from provisioner.scheduling.solver.pricing import launch_options
from provisioner.scheduling.solver.queue import PodQueue, PodShape, QueuedPod, shape_of
from provisioner.scheduling.solver.scores import NodeScorer, scorer
from provisioner.scheduling.solver.templates import (
    NodeTemplate,
    build_templates,
    matching_options,
    offerings,
    options_for,
)
from provisioner.scheduling.solver.topology import (
    AFFINITY,
    ANTI_AFFINITY,
    Even,
    Topology,
    TopologyConstraint,
    ViewKey,
)
from provisioner.scheduling.solver.vectors import Dimensions, Vector, fits, plus

#: After a first fit, how many further planned nodes are tried for one that holds the pod in
#: its slack (at no extra price): best-fit where it is free, bounded so big batches stay linear.
SLACK_SEARCH = 4
#: Refuse planned nodes by their decided topology domains before trying them in full
#: (:class:`~provisioner.scheduling.solver.topology.DecidedDomains`); the plan is the same
#: either way (a test solves varied workloads with it on and off), only faster.
TOPOLOGY_FAST_PATH = True
#: A price difference below this many USD/hour counts as none.
_PRICE_EPSILON = 1e-12


# =========================================================================== public values
@dataclass(frozen=True)
class SolverInput:
    """Everything one solve needs.

    ``instance_types`` maps a Provisioner name to its instance types (with offerings and
    prices). ``provisioner_usage`` is the capacity already counted against each
    Provisioner's limits (its existing and in-flight nodes). ``zones`` maps a Provisioner name
    to the zones its subnets cover (None: no restriction beyond the offerings). ``node_labels``:
    the labels the controller puts on every node it launches, on keys a Provisioner does not
    name (:func:`~provisioner.scheduling.provisioners.provisioner_node_labels`).
    """

    pods: Sequence[Pod]
    provisioners: Sequence[Provisioner]
    instance_types: Mapping[str, Sequence[InstanceType]]
    nodes: Sequence[ClusterNode] = ()
    daemonsets: Sequence[Pod] = ()
    provisioner_usage: Mapping[str, Resources] = field(default_factory=dict)
    zones: Mapping[str, frozenset[str]] | None = None
    node_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedNode:
    """A node to launch: its Provisioner, the pods it is for, and what may be bought for it.

    ``instance_type_options`` are cheapest first (at most 60), each fitting every pod plus its
    DaemonSet overhead; ``offering`` is the cheapest allowed offering of the first option and
    ``price`` its USD/hour. ``labels`` and ``taints`` are those the node is launched with
    (the Provisioner's, plus single-valued requirements such as a zone chosen for topology).
    """

    provisioner: str
    pods: tuple[Pod, ...]
    requirements: Requirements
    instance_type_options: tuple[InstanceType, ...]
    offering: Offering
    price: float
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]

    @property
    def instance_type(self) -> InstanceType:
        """The cheapest option (what the plan's price assumes)."""
        return self.instance_type_options[0]


@dataclass(frozen=True)
class ExistingPlacement:
    """Pods that fit an existing or in-flight node (kube-scheduler will bind them there)."""

    node: str
    pods: tuple[Pod, ...]


@dataclass(frozen=True)
class PodError:
    """A pod the plan does not place, with a human reason (key and value sets when it's requirements)."""

    pod: Pod
    reason: str


@dataclass(frozen=True)
class Plan:
    new_nodes: tuple[PlannedNode, ...] = ()
    existing: tuple[ExistingPlacement, ...] = ()
    unschedulable: tuple[PodError, ...] = ()

    @property
    def total_price(self) -> float:
        """USD/hour of the new nodes (each at its cheapest option's offering)."""
        return sum(n.price for n in self.new_nodes)


# =========================================================================== the solve
def _dimensions(given: SolverInput) -> Dimensions:
    """Every resource name the solve meets, plus cpu, memory and pods."""
    names: set[str] = {CPU, MEMORY, PODS}
    for pod in given.pods:
        names.update(pod.requests)
    for ds in given.daemonsets:
        names.update(ds.requests)
    for types in given.instance_types.values():
        for it in types:
            names.update(it.capacity)
    for node in given.nodes:
        names.update(node.allocatable)
    return Dimensions.of(names)


def _pending(pod: Pod) -> bool:
    """Pods bound to a node, being preempted for (nominated) or finished are not planned."""
    return not (pod.node_name or pod.nominated_node_name or pod.phase in ("Succeeded", "Failed"))


class _Solver:
    """One solve: its templates, existing nodes, topology, caches and the nodes it opens.

    ``learnt``: what earlier solves of the same input learnt about hostname spread
    (:class:`~provisioner.scheduling.solver.topology.Topology`). ``unplaced``: per (shape,
    requests), how many such pods are not placed yet, none at zero (counted once, decremented
    as each is placed): the run of identical pods a new node may be opened for (:meth:`_open`).
    """

    def __init__(self, given: SolverInput, cost_aware: bool = True,
                 learnt: Mapping[ViewKey, Even | None] | None = None) -> None:
        self.input = given
        self.cost_aware = cost_aware
        self.dimensions = _dimensions(given)
        self.memo = Memo()
        self.templates: list[NodeTemplate] = build_templates(
            self.memo, self.dimensions, given.provisioners, given.instance_types, given.daemonsets,
            given.provisioner_usage, given.zones, given.node_labels)
        self.existing = existing_nodes(given.nodes, given.provisioners, self.dimensions)
        self.new_nodes: list[OpenNode] = []
        self.unplaced: Counter[tuple[PodShape, Vector]] = Counter()
        self.topology = Topology(self.templates, self.existing, self.new_nodes,
                                 [p for p in given.pods if _pending(p)], self.memo, learnt)
        running = [p for n in given.nodes if not n.marked_for_deletion for p in n.pods if not p.deleting]
        self.topology.register(list(given.pods) + running)
        for node in self.existing:
            for pod in node.cluster_node.pods:
                if not pod.deleting:
                    self.topology.record(pod, node)

    def solve(self) -> Plan:
        pending = [QueuedPod(pod, self.dimensions.vector(pod.requests),
                             shape_of(pod, self.topology, self.memo, self.feasible))
                   for pod in self.input.pods if _pending(pod)]
        unplaced = self.unplaced
        unplaced.update((q.shape, q.requests) for q in pending)
        queue = PodQueue(pending)
        failures = self.memo.failures
        placed = 0
        while (queued := queue.pop()) is not None:
            failure_key = (queued.shape, queued.requests, queued.relaxation, placed)
            error = failures.get(failure_key)
            if error is None:
                error = self.place(queued)
            if error is None:
                queue.placed()
                placed += 1
                key = (queued.shape, queued.requests)
                unplaced[key] -= 1
                if not unplaced[key]:
                    del unplaced[key]
                continue
            failures[failure_key] = error
            queue.retry(queued, error)
        return Plan(
            new_nodes=tuple(self._launch(n) for n in self.new_nodes),
            existing=tuple(ExistingPlacement(n.name, tuple(n.pods)) for n in self.existing if n.pods),
            unschedulable=tuple(PodError(q.pod, q.error) for q in queue.remaining()),
        )

    # ------------------------------------------------------------------ placing one pod
    def feasible(self, pod: Pod, shape: PodShape, preferred: Requirements) -> bool:
        """Whether some new node could take a pod of ``shape`` under its required constraints AND ``preferred``.

        A template whose NoSchedule and NoExecute taints the pod tolerates, with an option of the
        pod's kind (accelerator or not) that meets the requirements and has an allowed offering.
        Room, host ports and limits are left to placement (they may change as the plan grows).
        """
        for template in self.templates:
            if tolerates_all(pod.tolerations, template.taints) is not None:
                continue
            for required in shape.required:
                if not isinstance(matching_options(self.memo, template, shape.accelerator, required & preferred), str):
                    return True
        return False

    def constraints(self, queued: QueuedPod) -> tuple[list[TopologyConstraint], list[Alternative]]:
        """The pod's held topology constraints and the ways a new node may take it (preferred terms held)."""
        key = (queued.shape, queued.relaxation)
        cached = self.memo.constraints.get(key)
        if cached is None:
            pod, relaxation, shape = queued.pod, queued.relaxation, queued.shape
            cached = (
                self.topology.constraints(pod, held_spread(pod, relaxation), held_pod_affinity(pod, relaxation),
                                          held_pod_anti_affinity(pod, relaxation)),
                requirement_alternatives(shape.required, shape.preferred_sets[relaxation.node_affinity]),
            )
            self.memo.constraints[key] = cached
        return cached

    def place(self, queued: QueuedPod) -> str | None:
        """Place ``queued`` on an existing node, a planned node or a new node; None, or why it fits nowhere."""
        constraints, alternatives = self.constraints(queued)
        existing = self._existing_node(queued, constraints)
        if existing is not None:
            existing.add(queued)
            self.topology.record(queued.pod, existing, queued.shape)
            return None
        if self._place_on_planned(queued, constraints, alternatives):
            return None
        reasons: list[str] = []
        for template in self.templates:
            reason = self._open(queued, constraints, alternatives, template)
            if reason is None:
                return None
            reasons.append(f"provisioner {template.provisioner.name}: {reason}")
        if not self.templates:
            reasons.append("no provisioner")
        return "; ".join(reasons)

    def _existing_node(self, queued: QueuedPod, constraints: list[TopologyConstraint]) -> ExistingNode | None:
        """The existing node kube-scheduler would bind ``queued`` to, of those that take it now; None when none does.

        Nodes are judged by the pod's required constraints alone (``PodShape.required``, the
        DoNotSchedule spread and required pod (anti-)affinity among ``constraints``,
        NoSchedule and NoExecute taints): an initialised node before an in-flight one
        (kube-scheduler binds to the Ready nodes it has), then, among two or more that take
        it, the highest total of kube-scheduler's scores (:mod:`~provisioner.scheduling.solver.scores`),
        then the order tried.
        """
        shape, memo = queued.shape, self.memo
        taking: list[ExistingNode] = []
        for node in self.existing:
            if taking and node.cluster_node.in_flight and not taking[0].cluster_node.in_flight:
                break
            fit = node.can_add(queued, constraints, shape.required, self.topology, memo)
            if isinstance(fit, ExistingFit):
                taking.append(node)
        if len(taking) < 2:
            return taking[0] if taking else None
        first = taking[0]
        requests = (queued.requests[first.cpu_at], queued.requests[first.memory_at])
        return self._scorer(queued).best(taking, requests, memo)

    def _scorer(self, queued: QueuedPod) -> NodeScorer:
        """How existing nodes score for ``queued`` (:func:`~provisioner.scheduling.solver.scores.scorer`)."""
        pod = queued.pod
        affinity = tuple((t.weight or 0, self.topology.term_group(AFFINITY, t)) for t in pod.preferred_pod_affinity)
        affinity += tuple((-(t.weight or 0), self.topology.term_group(ANTI_AFFINITY, t))
                          for t in pod.preferred_pod_anti_affinity)
        return scorer(pod, queued.shape, affinity)

    def _place_on_planned(self, queued: QueuedPod, constraints: list[TopologyConstraint],
                          alternatives: list[Alternative]) -> bool:
        """Place ``queued`` on a node planned so far; False when none takes it.

        First fit, unless one of the next :data:`SLACK_SEARCH` nodes holds the pod for less
        (cost-aware mode). Nodes that refused this kind of pod permanently are skipped next
        time: a prefix pointer per (shape, relaxation, requests) keeps the scan short.

        Fast paths (:data:`TOPOLOGY_FAST_PATH`): the scan starts past the planned nodes that have
        no room for the pod's requests in any option (``Memo.full``), which refuse it first thing
        and permanently; a node whose decided topology domain refuses the
        pod (a zone over its spread's skew, a hostname holding an anti-affine pod) is passed
        over without the full check, which would refuse it too; while the skip pointer may still
        move, only when the full check would give that very refusal and it is permanent
        (:meth:`DecidedDomains.refusal`), so the pointer moves exactly as the full check moves it.
        A node whose every topology key is decided and allows the pod is tried without the
        topology check, whose answer (allowed, nothing to pin) is known.
        """
        skip_key = (queued.shape, queued.relaxation, queued.requests)
        skip = self.memo.skip
        prefix = True
        new_nodes = self.new_nodes
        best: Candidate | None = None
        looked = 0
        shape = queued.shape
        decided = (self.topology.decided_domains(shape, constraints)
                   if TOPOLOGY_FAST_PATH and (constraints or shape.selected_by or shape.anti_affinity_groups)
                   else None)
        for i in range(self._scan_start(skip_key), len(new_nodes)):
            if best is not None:
                looked += 1
                if looked > SLACK_SEARCH:
                    break
            node = new_nodes[i]
            answer = decided.refusal(node) if decided is not None else None
            if answer is not None and answer[0].reason is not None:
                if prefix and not (answer[1] and answer[0].permanent):
                    answer = None  # the full check decides how long the refusal lasts
                else:
                    if prefix:
                        skip[skip_key] = i + 1
                    continue
            outcome = node.can_add(queued, constraints, alternatives, self.topology, self.memo, self.cost_aware,
                                   topology_allows=answer is not None)
            if isinstance(outcome, Candidate):
                if prefix:
                    skip[skip_key] = i
                    prefix = False
                if not self.cost_aware:
                    best = outcome
                    break
                if best is None or outcome.extra_price < best.extra_price - _PRICE_EPSILON:
                    best = outcome
                if outcome.extra_price <= _PRICE_EPSILON:
                    break
            elif prefix:
                if outcome is PERMANENT:
                    skip[skip_key] = i + 1
                else:
                    prefix = False
        if best is None:
            return False
        self._commit(best)
        return True

    def _scan_start(self, skip_key: tuple[PodShape, Relaxation, Vector]) -> int:
        """Where a scan of the planned nodes starts: the skip pointer, moved past full nodes (fast path)."""
        skip = self.memo.skip
        start = skip.get(skip_key, 0)
        if TOPOLOGY_FAST_PATH:
            full = self._full_until(skip_key[2])
            if full > start:  # every node in between refuses on room: the pointer would pass them
                start = skip[skip_key] = full
        return start

    def _full_until(self, requests: Vector) -> int:
        """The first planned node that might still hold ``requests`` (``Memo.full``, moved on past full nodes)."""
        full, new_nodes = self.memo.full, self.new_nodes
        index = full.get(requests, 0)
        while index < len(new_nodes) and not fits(plus(new_nodes[index].requested, requests),
                                                  new_nodes[index].max_allocatable):
            index += 1
        full[requests] = index
        return index

    def _open(self, queued: QueuedPod, constraints: list[TopologyConstraint], alternatives: list[Alternative],
              template: NodeTemplate) -> str | None:
        """Open a new node of ``template`` for ``queued``; None, or why the template cannot.

        In cost-aware mode the node is opened for the run of pods identical to ``queued`` still
        unplaced (:func:`~provisioner.scheduling.solver.planned.open_node`).
        """
        run = self.unplaced[queued.shape, queued.requests] if self.cost_aware else 1
        pod = queued.pod
        reason = tolerates_all(pod.tolerations, template.taints, queued.relaxation.prefer_no_schedule)
        if reason is not None:
            return reason
        last = "no compatible requirements"
        for alternative in alternatives:
            screened = options_for(self.memo, template, pod, queued.shape.accelerator, queued.requests,
                                   alternative.requirements)
            if isinstance(screened, str):
                last = screened
                continue
            opened = open_node(len(self.new_nodes), template, queued, constraints, alternative, *screened,
                               self.topology, self.memo, run, self._room_wanted)
            if isinstance(opened, str):
                last = opened
                continue
            self.new_nodes.append(opened.node)
            self.topology.add_node(opened.node)
            self._commit(opened)
            return None
        return last

    def _room_wanted(self, queued: QueuedPod, room: Vector) -> bool:
        """Whether some unplaced pod other than those identical to ``queued`` fits in ``room`` (its requests)."""
        own = (queued.shape, queued.requests)
        return any(key != own and fits(key[1], room) for key in self.unplaced)

    def _commit(self, candidate: Candidate) -> None:
        node, queued = candidate.node, candidate.queued
        self.topology.note_placement(self.constraints(queued)[0], node)
        node.add(candidate, self.memo)
        self.topology.record(queued.pod, node, queued.shape)

    # ------------------------------------------------------------------ the plan
    def _launch(self, node: OpenNode) -> PlannedNode:
        """What to launch for ``node``: its cheapest options (none larger than what it holds against limits)."""
        template = node.template
        chosen = launch_options(self.memo, node.options, node.requirements, node.requested)
        if template.limits is not None:
            chosen = [e for e in chosen if template.within(e.option.capacity, node.reserved)]
        options = tuple(e.option.instance_type for e in chosen)
        offered = [o for e in chosen for o in offerings(self.memo, e.option, node.requirements)]
        requirements = node.requirements & Requirements((
            Requirement.of(wk.INSTANCE_TYPE, IN, [it.name for it in options]),
            Requirement.of(wk.ZONE, IN, sorted({o.zone for o in offered})),
            Requirement.of(wk.CAPACITY_TYPE, IN, sorted({o.capacity_type for o in offered})),
        ))
        return PlannedNode(
            provisioner=template.provisioner.name,
            pods=tuple(node.pods),
            requirements=requirements,
            instance_type_options=options,
            offering=chosen[0].offering,
            price=chosen[0].price,
            labels=template.launch_labels(requirements),
            taints=template.taints,
        )


#: Solves of one input at most: the first, one filling evenly the hostname spread views whose
#: minimum the first did not keep, one with the views still unkept taken as ``ONE`` (which holds).
MAX_SOLVES = 3


def _solve(given: SolverInput, cost_aware: bool) -> Plan:
    """Solve; again while a hostname spread view's rule was not kept by the finished plan.

    See :mod:`provisioner.scheduling.solver.topology`: an ``AS_PLANNED`` view whose placements
    relied on a larger minimum than the plan ended with is filled evenly next time, and if that
    fails too, taken as ``ONE``. Only a workload whose pods are the only ones that could open
    the nodes its constraint counts can need this (otherwise the minimum is 0 from the start).
    """
    learnt: dict[ViewKey, Even | None] = {}
    solver = _Solver(given, cost_aware)
    plan = solver.solve()
    for _ in range(MAX_SOLVES - 1):
        revised = solver.topology.revisions()
        if not revised:
            break
        learnt.update(revised)
        solver = _Solver(given, cost_aware, learnt)
        plan = solver.solve()
    return plan


def solve(given: SolverInput) -> Plan:
    """Plan new nodes and placements for ``given.pods`` (see :mod:`provisioner.scheduling.solver`).

    Pods bound to a node (``node_name``), being preempted for (``nominated_node_name``) or
    finished are left out of the plan. Raises ValueError only for an invalid Provisioner (an
    unknown requirement operator, a malformed limit).
    """
    return _solve(given, cost_aware=True)


def solve_first_fit(given: SolverInput) -> Plan:
    """The plain first-fit-decreasing baseline over the same constraints and options.

    Identical to :func:`solve` except that a planned node accepts any pod that still fits some
    option, however much that raises its price (Karpenter's rule). Benchmarks compare against it.
    """
    return _solve(given, cost_aware=False)
