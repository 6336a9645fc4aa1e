"""The solver: pending pods in, a plan of nodes to launch (and pods for existing nodes) out.

Pure and deterministic (frozen values in, a :class:`Plan` out, no clock, no randomness), so the
provisioning controller, the extender and ``groupless plan`` make the same decisions.

The algorithm follows today's Karpenter (``pkg/controllers/provisioning/scheduling``), which
fixed v0.6.3's shortcomings (one Provisioner at a time, pods with affinity ignored, limits
checked once per batch, topology always hard):

1. Pods are queued by cpu, then memory, descending (first-fit decreasing), then creation
   time and UID, so the plan does not depend on input order.
2. Each pod is tried, in order: on existing nodes (initialised first, then in-flight, by
   name), on the new nodes planned so far (in the order they were opened), and on a new node
   of the first Provisioner (``weight`` desc, then name) whose requirements, taints, limits
   and instance types can take it.
3. A planned node keeps every instance type that still fits all of its pods plus that type's
   DaemonSet overhead and still has an allowed offering; a pod joins only if one remains. The
   node's requirements narrow as pods join (a zone chosen for topology, a nodeSelector).
4. When a pod fits nowhere, one preference is relaxed (preferred pod affinity, preferred pod
   anti-affinity, preferred node affinity heaviest first, ScheduleAnyway spread, then
   PreferNoSchedule taints) and the pod goes to the back of the queue; the loop ends after a
   full pass without progress, so affinity chains settle.
5. Each planned node's instance type options are ordered by the price of their cheapest
   allowed offering and cut to 60; its price is the cheapest option's.

Limits are enforced while packing: a new node only gets instance types whose capacity still
fits ``limits - usage - capacity reserved by the nodes planned so far`` (each planned node
reserves the capacity of its *largest* remaining option, since the cloud provider may launch
any option), so a burst never overshoots a limit.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import add, le, sub
from typing import Any

from provisioner.api.types import Provisioner, Taint
from provisioner.model import labels as wk
from provisioner.model.quantity import format_quantity
from provisioner.model.requirements import (
    DOES_NOT_EXIST,
    IN,
    NOT_IN,
    Requirement,
    Requirements,
)
from provisioner.model.resources import ACCELERATORS, CPU, MEMORY, PODS, Resources
from provisioner.model.taints import EPHEMERAL_TAINT_KEYS
from provisioner.scheduling.instancetypes import InstanceType, Offering
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import (
    HostPort,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    tolerates_all,
)
from provisioner.scheduling.provisioners import (
    order_provisioners,
    provisioner_limits,
    provisioner_requirements,
    provisioner_taints,
)

#: At most this many instance type options per planned node (the AWS provider's cut, Karpenter v1).
MAX_INSTANCE_TYPES = 60
#: Keys an instance type or offering fills in at launch: a pod may ask for them even when the
#: Provisioner does not mention them.
_LAUNCH_KEYS = frozenset({wk.ZONE, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.CAPACITY_TYPE})
_SPREAD, _AFFINITY, _ANTI = "spread", "affinity", "anti"
_PLACED, _NEVER, _NOT_NOW = 0, 1, 2
#: After a first fit, how many further planned nodes are tried for one that holds the pod in
#: its slack (at no extra price): best-fit where it is free, bounded so big batches stay linear.
_SLACK_SEARCH = 4


# =========================================================================== public values
@dataclass(frozen=True)
class SolverInput:
    """Everything one solve needs.

    ``instance_types`` maps a Provisioner name to its instance types (with offerings and
    prices). ``provisioner_usage`` is the capacity already counted against each
    Provisioner's limits (its existing and in-flight nodes). ``zones`` maps a Provisioner name
    to the zones its subnets cover (None: no restriction beyond the offerings).
    """

    pods: Sequence[Pod]
    provisioners: Sequence[Provisioner]
    instance_types: Mapping[str, Sequence[InstanceType]]
    nodes: Sequence[ClusterNode] = ()
    daemonsets: Sequence[Pod] = ()
    provisioner_usage: Mapping[str, Resources] = field(default_factory=dict)
    zones: Mapping[str, frozenset[str]] | None = None


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


# =========================================================================== vectors
Vec = tuple[int, ...]


def _fits(need: Vec, have: Vec) -> bool:
    return all(map(le, need, have))


def _add(a: Vec, b: Vec) -> Vec:
    return tuple(map(add, a, b))


def _sub(a: Vec, b: Vec) -> Vec:
    return tuple(map(sub, a, b))


def _vmax(a: Vec, b: Vec) -> Vec:
    return tuple(map(max, a, b))


def _any_fit(options: list[_Type], total: Vec) -> bool:
    """True when some option holds ``total`` (options are sorted largest first, so this is quick)."""
    for t in options:
        if all(map(le, total, t.alloc)):
            return True
    return False


def _fitting(options: list[_Type], total: Vec) -> list[_Type]:
    return [t for t in options if all(map(le, total, t.alloc))]


# =========================================================================== topology groups
@dataclass(eq=False)
class _Group:
    """Pods matching ``selector`` in ``namespaces`` counted per domain of ``key``.

    ``owners`` holds the domains of pods carrying a required anti-affinity term of this group
    (a pod the term selects may not join those domains: anti-affinity is symmetric).
    """

    key: str
    namespaces: frozenset[str]
    all_namespaces: bool
    selector: LabelSelector
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    owners: set[str] = field(default_factory=set)

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if not self.all_namespaces and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)

    def record(self, domain: str) -> None:
        self.counts[domain] = self.counts.get(domain, 0) + 1
        self.total += 1


@dataclass(frozen=True)
class _Constraint:
    kind: str
    group: _Group
    max_skew: int = 1
    self_match: bool = False
    spread_hard: bool = True


# =========================================================================== catalog per Provisioner
@dataclass(eq=False)
class _Type:
    it: InstanceType
    alloc: Vec  # allocatable minus this template's DaemonSet overhead
    capacity: Vec
    accel: bool
    ds_ports: tuple[HostPort, ...]
    offer_cache: dict[tuple[Any, Any], tuple[Offering, ...]] = field(default_factory=dict)

    def offerings(self, reqs: Requirements) -> tuple[Offering, ...]:
        """Available offerings whose zone and capacity type ``reqs`` allow (cached per pair)."""
        key = (reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE))
        found = self.offer_cache.get(key)
        if found is None:
            found = self.it.available_offerings(reqs)
            self.offer_cache[key] = found
        return found

    def cheapest(self, reqs: Requirements) -> Offering | None:
        offerings = self.offerings(reqs)
        if not offerings:
            return None
        return min(offerings, key=lambda o: (o.price, o.capacity_type, o.zone))


@dataclass(eq=False)
class _Template:
    index: int
    provisioner: Provisioner
    reqs: Requirements
    taints: tuple[Taint, ...]
    labels: dict[str, str]
    types: list[_Type]
    limits: Vec | None
    usage: Vec
    reserved: Vec
    allow_undefined: frozenset[str]
    limit_names: tuple[str, ...]
    limit_dim: int = -1  # index of the first limited resource in the solver's dims (-1: none)
    compat_cache: dict[Requirements, str | None] = field(default_factory=dict)
    types_cache: dict[tuple[Requirements, bool], list[_Type]] = field(default_factory=dict)
    fit_cache: dict[tuple[Requirements, bool, Vec], list[_Type]] = field(default_factory=dict)


# =========================================================================== nodes being planned
@dataclass(eq=False)
class _Node:
    index: int
    hostname: str
    reqs: Requirements
    taints: tuple[Taint, ...]
    requested: Vec
    ports: list[HostPort]
    pods: list[Pod]
    template: _Template | None = None
    existing: ClusterNode | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Vec = ()
    options: list[_Type] = field(default_factory=list)
    max_alloc: Vec = ()
    max_capacity: Vec = ()
    reserved: Vec = ()
    accel: bool | None = None
    price: float = 0.0
    price_list: list[tuple[float, str, _Type, Offering]] | None = None
    price_index: int = 0
    compat: dict[Requirements, tuple[Requirements, list[_Type]] | str] = field(default_factory=dict)

    def domain(self, key: str) -> str | None:
        """The node's value for ``key``; None while it is not decided yet (or absent)."""
        if key == wk.HOSTNAME:
            return self.hostname
        if self.existing is not None:
            return self.labels.get(key)
        requirement = self.reqs.get(key)
        if requirement is not None and not requirement.complement and len(requirement.values) == 1:
            return next(iter(requirement.values))
        return None


# =========================================================================== pods being placed
@dataclass(eq=False)
class _Shape:
    """What identical pods share: requirements alternatives, constraints, groups."""

    base: Requirements
    terms: tuple[Requirements, ...]
    accel: bool
    selected_by: tuple[_Group, ...] = ()
    anti_owned: tuple[_Group, ...] = ()
    constraint_cache: dict[tuple[int, int, int, int], tuple[list[_Constraint], list[Requirements]]] = field(
        default_factory=dict
    )


@dataclass(eq=False)
class _View:
    pod: Pod
    vec: Vec
    shape: _Shape
    relaxed_pod_affinity: int = 0
    relaxed_pod_anti: int = 0
    relaxed_node_affinity: int = 0
    relaxed_spread: int = 0
    prefer_no_schedule: bool = True

    def relax(self) -> str | None:
        """Drop one preference (Karpenter's order); the description, or None when none is left."""
        pod = self.pod
        if self.relaxed_pod_affinity < len(pod.preferred_pod_affinity):
            self.relaxed_pod_affinity += 1
            return "preferred pod affinity"
        if self.relaxed_pod_anti < len(pod.preferred_pod_anti_affinity):
            self.relaxed_pod_anti += 1
            return "preferred pod anti-affinity"
        if self.relaxed_node_affinity < len(pod.preferred_node_affinity):
            self.relaxed_node_affinity += 1
            return "preferred node affinity"
        if self.relaxed_spread < sum(1 for c in pod.topology_spread if not c.hard):
            self.relaxed_spread += 1
            return "ScheduleAnyway topology spread"
        if self.prefer_no_schedule:
            self.prefer_no_schedule = False
            return "PreferNoSchedule taints"
        return None


class _Solver:
    def __init__(self, given: SolverInput, cost_aware: bool = True) -> None:
        self.input = given
        self.cost_aware = cost_aware
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
        self.dims = tuple(sorted(names))
        self.zero: Vec = tuple(0 for _ in self.dims)
        self.groups: dict[tuple[Any, ...], _Group] = {}
        self.nodes: list[_Node] = []
        self.new_nodes: list[_Node] = []
        self.shapes: dict[tuple[Any, ...], _Shape] = {}
        self.domain_cache: dict[tuple[Requirements, str], frozenset[str]] = {}
        self.envelope_cache: dict[int, tuple[list[_Type], Vec, Vec]] = {}
        self.limit_cache: dict[tuple[int, int], tuple[list[_Type], list[int], list[Vec]]] = {}
        self.possible_cache: dict[tuple[Any, ...], tuple[list[_Type], frozenset[str]]] = {}
        self.pin_cache: dict[tuple[Any, ...], tuple[list[_Type], Requirements, list[_Type]]] = {}
        self.standalone_cache: dict[tuple[Any, ...], float] = {}
        self.pending: tuple[float, tuple[Any, ...]] = (0.0, ())
        self.skip: dict[tuple[Any, ...], int] = {}
        self.price_cache: dict[tuple[int, Any, Any], tuple[list[_Type], list[tuple[float, str, _Type, Offering]]]] = {}
        self.templates = self._templates()
        self._existing_nodes()

    # ------------------------------------------------------------------ setup
    def vec(self, resources: Mapping[str, int]) -> Vec:
        get = resources.get
        return tuple(get(name) or 0 for name in self.dims)

    def _templates(self) -> list[_Template]:
        given = self.input
        templates = []
        for index, p in enumerate(order_provisioners(given.provisioners)):
            reqs = provisioner_requirements(p)
            if given.zones is not None and p.name in given.zones:
                reqs = reqs.with_requirement(Requirement.of(wk.ZONE, IN, sorted(given.zones[p.name])))
            taints = provisioner_taints(p)
            types: list[_Type] = []
            type_keys: set[str] = set()
            for it in given.instance_types.get(p.name, ()):
                if it.requirements.intersects(reqs) is not None or not it.available_offerings(reqs):
                    continue
                node_reqs = reqs & it.requirements
                overhead = Resources()
                ports: list[HostPort] = []
                for ds in given.daemonsets:
                    if tolerates_all(ds.tolerations, taints) is not None:
                        continue
                    if not _daemon_matches(ds, node_reqs):
                        continue
                    overhead = overhead + ds.requests
                    ports.extend(ds.host_ports)
                types.append(_Type(it, self.vec(it.allocatable - overhead), self.vec(it.capacity),
                                   it.has_accelerator, tuple(ports)))
                type_keys.update(k for k, _ in it.labels)
            types.sort(key=lambda t: (tuple(-x for x in t.alloc), t.it.name))
            if types:
                # Karpenter's effective requirements: what the instance types can offer, so a pod
                # asking for another zone, arch or capacity type is told the sets that exist.
                offered = [o for t in types for o in t.offerings(reqs)]
                reqs = reqs & Requirements((
                    Requirement.of(wk.ZONE, IN, sorted({o.zone for o in offered})),
                    Requirement.of(wk.CAPACITY_TYPE, IN, sorted({o.capacity_type for o in offered})),
                    Requirement.of(wk.ARCH, IN, sorted({t.it.arch for t in types})),
                    Requirement.of(wk.OS, IN, sorted({t.it.os for t in types})),
                ))
            limits = provisioner_limits(p)
            limit_names = tuple(sorted(limits)) if limits else ()
            usage = self.vec(given.provisioner_usage.get(p.name, Resources()))
            templates.append(_Template(
                index=index, provisioner=p, reqs=reqs, taints=taints, labels=p.labels_with_name, types=types,
                limits=self.vec(limits) if limits is not None else None, usage=usage, reserved=self.zero,
                allow_undefined=_LAUNCH_KEYS | frozenset(type_keys), limit_names=limit_names,
                limit_dim=next((self.dims.index(n) for n in limit_names if n in self.dims), -1),
            ))
        return templates

    def group(self, kind: str, key: str, namespaces: frozenset[str], all_ns: bool, selector: LabelSelector) -> _Group:
        gkey = (kind, key, namespaces, all_ns, selector)
        group = self.groups.get(gkey)
        if group is None:
            group = _Group(key, namespaces, all_ns, selector)
            self.groups[gkey] = group
        return group

    def _term_group(self, kind: str, term: PodAffinityTerm) -> _Group:
        return self.group(kind, term.topology_key, term.namespaces, term.all_namespaces, term.selector)

    def _spread_group(self, pod: Pod, c: TopologySpreadConstraint) -> _Group:
        return self.group(_SPREAD, c.topology_key, frozenset({pod.namespace}), False, c.selector)

    def register_groups(self, pods: Sequence[Pod]) -> None:
        """Create every topology group any pending or running pod speaks of, before counting."""
        for pod in pods:
            for c in pod.topology_spread:
                self._spread_group(pod, c)
            for t in pod.pod_affinity + pod.preferred_pod_affinity:
                self._term_group(_AFFINITY, t)
            for t in pod.pod_anti_affinity + pod.preferred_pod_anti_affinity:
                self._term_group(_ANTI, t)

    def _existing_nodes(self) -> None:
        given = self.input
        running = [p for n in given.nodes if not n.marked_for_deletion for p in n.pods if not p.deleting]
        self.register_groups(list(given.pods) + running)
        ordered = sorted(given.nodes, key=lambda n: (n.in_flight, n.name))
        startup_taints = {p.name: p.spec.startup_taints for p in given.provisioners}
        for node in ordered:
            if node.marked_for_deletion:
                continue
            labels = dict(node.labels)
            labels.setdefault(wk.HOSTNAME, node.name)
            taints = node.taints
            if node.in_flight:
                # a launching node still carries taints that go away once it is initialised
                # (Karpenter ignores them for in-flight capacity): the not-ready and
                # uninitialised taints and its Provisioner's startupTaints
                startup = startup_taints.get(node.provisioner or "", ())
                taints = tuple(t for t in taints if t.key not in EPHEMERAL_TAINT_KEYS
                               and not any(t.key == s.key and t.effect == s.effect for s in startup))
            n = _Node(
                index=len(self.nodes), hostname=labels[wk.HOSTNAME], reqs=Requirements.from_labels(labels),
                taints=taints, requested=self.vec(node.requested), ports=list(node.host_ports), pods=[],
                existing=node, labels=labels, allocatable=self.vec(node.allocatable),
            )
            self.nodes.append(n)
            for pod in node.pods:
                if pod.deleting:
                    continue
                self._record(pod, n)

    # ------------------------------------------------------------------ pods
    def shape_of(self, pod: Pod) -> _Shape:
        skey = (
            pod.namespace, frozenset(pod.labels.items()), frozenset(pod.node_selector.items()),
            pod.required_node_affinity, pod.preferred_node_affinity, pod.tolerations, pod.topology_spread,
            pod.pod_affinity, pod.pod_anti_affinity, pod.preferred_pod_affinity,
            pod.preferred_pod_anti_affinity, pod.host_ports, pod.volume_requirements,
            any(pod.requests.get(a) > 0 for a in ACCELERATORS),
        )
        shape = self.shapes.get(skey)
        if shape is None:
            selected_by = tuple(
                g for (kind, *_), g in self.groups.items()
                if kind in (_SPREAD, _AFFINITY, _ANTI) and g.selects(pod.namespace, pod.labels)
            )
            shape = _Shape(
                base=pod.base_requirements,
                terms=pod.required_node_affinity or (Requirements(),),
                accel=bool(skey[-1]),
                selected_by=tuple(dict.fromkeys(selected_by)),
                anti_owned=tuple(self._term_group(_ANTI, t) for t in pod.pod_anti_affinity),
            )
            self.shapes[skey] = shape
        return shape

    def constraints(self, view: _View) -> tuple[list[_Constraint], list[Requirements]]:
        """The pod's active topology constraints and node requirement alternatives."""
        state = (view.relaxed_pod_affinity, view.relaxed_pod_anti, view.relaxed_node_affinity, view.relaxed_spread)
        cached = view.shape.constraint_cache.get(state)
        if cached is not None:
            return cached
        pod = view.pod
        out: list[_Constraint] = []
        soft_index = 0
        for c in pod.topology_spread:
            if not c.hard:
                soft_index += 1
                if soft_index <= view.relaxed_spread:
                    continue
            group = self._spread_group(pod, c)
            out.append(_Constraint(_SPREAD, group, c.max_skew, c.selector.matches(pod.labels), c.hard))
        for t in pod.pod_affinity + pod.preferred_pod_affinity[view.relaxed_pod_affinity:]:
            out.append(_Constraint(_AFFINITY, self._term_group(_AFFINITY, t), self_match=t.selects(pod.namespace, pod.labels)))
        for t in pod.pod_anti_affinity + pod.preferred_pod_anti_affinity[view.relaxed_pod_anti:]:
            out.append(_Constraint(_ANTI, self._term_group(_ANTI, t)))
        preferred = Requirements()
        for _, reqs in pod.preferred_node_affinity[view.relaxed_node_affinity:]:
            preferred = preferred & reqs
        alternatives = []
        seen: set[Requirements] = set()
        for term in view.shape.terms:
            alt = view.shape.base & term & preferred
            if alt not in seen:
                seen.add(alt)
                alternatives.append(alt)
        result = (out, alternatives)
        view.shape.constraint_cache[state] = result
        return result

    # ------------------------------------------------------------------ topology
    def spread_domains(self, reqs: Requirements, key: str) -> frozenset[str]:
        """Domains of ``key`` a pod with ``reqs`` could land in: templates' offerings and existing nodes."""
        ckey = (reqs, key)
        cached = self.domain_cache.get(ckey)
        if cached is not None:
            return cached
        values: set[str] = set()
        for t in self.templates:
            if t.reqs.compatible(reqs, t.allow_undefined) is not None:
                continue
            node_reqs = t.reqs & reqs
            for typ in t.types:
                values.update(_type_domains(typ, node_reqs, key))
        for node in self.nodes:
            if node.existing is not None:
                value = node.labels.get(key)
                if value is not None and _labels_satisfy(node.labels, reqs) is None:
                    values.add(value)
        result = frozenset(v for v in values if reqs.has(key, v))
        self.domain_cache[ckey] = result
        return result

    def topology(self, view: _View, cons: list[_Constraint], node: _Node, reqs: Requirements,
                 possible: Any) -> tuple[str | None, dict[str, str], bool]:
        """Check ``cons`` for the pod (requirements ``reqs``) on ``node``: (reason, keys to pin, permanent).

        ``possible(key)`` gives the values an undecided key of the node could still take.
        """
        pins: dict[str, str] = {}
        keys: dict[str, list[_Constraint]] = {}
        for c in cons:
            keys.setdefault(c.group.key, []).append(c)
        forbidden_owner: dict[str, set[str]] = {}
        for g in view.shape.selected_by:
            if g.owners:
                forbidden_owner.setdefault(g.key, set()).update(g.owners)
                keys.setdefault(g.key, [])
        for g in view.shape.selected_by:
            keys.setdefault(g.key, [])
        for g in view.shape.anti_owned:
            keys.setdefault(g.key, [])
        for key, key_cons in keys.items():
            domain = node.domain(key)
            candidates: list[str]
            if domain is not None:
                candidates = [domain]
            else:
                candidates = sorted(possible(key))
                if not candidates:
                    if key_cons or key in forbidden_owner:
                        return f"no node can carry topology key {key}", {}, True
                    continue
            allowed = []
            for value in candidates:
                if value in forbidden_owner.get(key, ()):
                    continue
                if all(self._allows(view, reqs, c, value) for c in key_cons):
                    allowed.append(value)
            if not allowed:
                permanent = domain is not None and (
                    domain in forbidden_owner.get(key, ())
                    or any((c.kind == _ANTI or (c.kind == _SPREAD and key == wk.HOSTNAME))
                           and not self._allows(view, reqs, c, domain) for c in key_cons))
                return _topology_reason(key, key_cons, key in forbidden_owner), {}, permanent
            if domain is None:
                spreads = [c.group for c in key_cons if c.kind == _SPREAD]
                pins[key] = min(allowed, key=lambda v: (sum(g.counts.get(v, 0) for g in spreads), v))
        return None, pins, False

    def _allows(self, view: _View, reqs: Requirements, c: _Constraint, value: str) -> bool:
        group = c.group
        count = group.counts.get(value, 0)
        if c.kind == _ANTI:
            return count == 0
        if c.kind == _AFFINITY:
            if group.total == 0:
                return c.self_match
            return count > 0
        # spread: skew = count(value) + self - min over eligible domains
        if group.key == wk.HOSTNAME:
            minimum = 0
        else:
            domains = self.spread_domains(reqs, group.key)
            minimum = min((group.counts.get(d, 0) for d in domains), default=0)
        return count + (1 if c.self_match else 0) - minimum <= c.max_skew

    def _record(self, pod: Pod, node: _Node, shape: _Shape | None = None) -> None:
        groups = (
            tuple(g for g in self.groups.values() if g.selects(pod.namespace, pod.labels))
            if shape is None else shape.selected_by
        )
        for g in groups:
            domain = node.domain(g.key)
            if domain is not None:
                g.record(domain)
        owned = (
            tuple(self._term_group(_ANTI, t) for t in pod.pod_anti_affinity)
            if shape is None else shape.anti_owned
        )
        for g in owned:
            domain = node.domain(g.key)
            if domain is not None:
                g.owners.add(domain)

    # ------------------------------------------------------------------ placement
    def add(self, view: _View) -> str | None:
        cons, alternatives = self.constraints(view)
        pod = view.pod
        reasons: list[str] = []
        for node in self.nodes:
            if self._try_existing(view, cons, alternatives, node):
                return None
        # Nodes that refused this kind of pod for a reason that cannot go away (resources, taints,
        # requirements, anti-affinity, host ports) are skipped next time: a prefix pointer per
        # (shape, relaxation state, requests) keeps the scan short on big batches.
        skip_key = (id(view.shape), view.relaxed_pod_affinity, view.relaxed_pod_anti, view.relaxed_node_affinity,
                    view.relaxed_spread, view.prefer_no_schedule, view.vec)
        start = self.skip.get(skip_key, 0)
        prefix = True
        new_nodes = self.new_nodes
        best: tuple[float, tuple[Any, ...]] | None = None
        looked = 0
        for i in range(start, len(new_nodes)):
            if best is not None:
                looked += 1
                if looked > _SLACK_SEARCH:
                    break
            outcome = self._try_new(view, cons, alternatives, new_nodes[i], commit=not self.cost_aware)
            if outcome == _PLACED:
                if prefix:
                    self.skip[skip_key] = i
                    prefix = False
                if not self.cost_aware:
                    return None
                # first fit, unless a node a little further holds the pod in its slack (free)
                marginal, args = self.pending
                if best is None or marginal < best[0] - 1e-12:
                    best = (marginal, args)
                if marginal <= 1e-12:
                    break
                continue
            if prefix:
                if outcome == _NEVER:
                    self.skip[skip_key] = i + 1
                else:
                    prefix = False
        if best is not None:
            self._commit(*best[1])
            return None
        for template in self.templates:
            reason = self._open(view, cons, alternatives, template)
            if reason is None:
                return None
            reasons.append(f"provisioner {template.provisioner.name}: {reason}")
        if not self.templates:
            reasons.append("no provisioner")
        del pod
        return "; ".join(reasons)

    def _try_existing(self, view: _View, cons: list[_Constraint], alternatives: list[Requirements], node: _Node) -> bool:
        pod = view.pod
        if not _fits(_add(node.requested, view.vec), node.allocatable):
            return False
        if tolerates_all(pod.tolerations, node.taints, view.prefer_no_schedule) is not None:
            return False
        if any(hp.conflicts(other) for hp in pod.host_ports for other in node.ports):
            return False
        for alt in alternatives:
            cached = node.compat.get(alt)
            if cached is None:
                cached = "" if _labels_satisfy(node.labels, alt) is None else "x"
                node.compat[alt] = cached
            if cached:
                continue
            reason, _, _ = self.topology(view, cons, node, alt, lambda key: ())
            if reason is None:
                node.requested = _add(node.requested, view.vec)
                node.ports.extend(pod.host_ports)
                node.pods.append(pod)
                self._record(pod, node, view.shape)
                return True
        return False

    def _try_new(self, view: _View, cons: list[_Constraint], alternatives: list[Requirements], node: _Node,
                 commit: bool = True) -> int:
        """_PLACED, _NEVER (refused for a reason that only gets worse) or _NOT_NOW."""
        pod = view.pod
        if node.accel is not None and node.accel != view.shape.accel:
            return _NEVER
        total = _add(node.requested, view.vec)
        if not _fits(total, node.max_alloc):
            return _NEVER
        template = node.template
        assert template is not None
        if template.limits is not None and not _fits(total, self._limit_envelope(node)):
            # no option this node may still grow into within the limits holds the pod: fail
            # before topology and pricing (a Provisioner at its limit refuses every pod cheaply)
            return _NEVER
        if pod.tolerations != () or node.taints:
            if tolerates_all(pod.tolerations, node.taints, view.prefer_no_schedule) is not None:
                return _NEVER
        if pod.host_ports and any(hp.conflicts(other) for hp in pod.host_ports for other in node.ports):
            return _NEVER
        outcome = _NEVER
        for alt in alternatives:
            cached = node.compat.get(alt)
            if cached is None:
                cached = self._narrow(node, alt)
                node.compat[alt] = cached
            if isinstance(cached, str):
                continue
            reqs, options = cached
            if not _any_fit(options, total):
                continue

            def possible(key: str, opts: list[_Type] = options, r: Requirements = reqs) -> frozenset[str]:
                return self._domains_of(opts, r, key)

            if cons or view.shape.selected_by or view.shape.anti_owned:
                reason, pins, permanent = self.topology(view, cons, node, alt, possible)
                if reason is not None:
                    if not permanent:
                        outcome = _NOT_NOW
                    continue
                if pins:
                    reqs, options = self._pinned(reqs, options, pins)
                    if not _any_fit(options, total):
                        continue
            if pod.host_ports:
                options = [t for t in options if not any(hp.conflicts(o) for hp in pod.host_ports for o in t.ds_ports)]
                if not _any_fit(options, total):
                    continue
            priced = self._price_after(node, options, reqs, total)
            if priced is None or (self.cost_aware
                                  and priced[0] - node.price > self._standalone(view, template, alt) + 1e-9):
                # growing this node costs more than a node of its own: first-fit would overpay.
                # Counted as permanent for the skip pointer (a heuristic: the node only gets
                # fuller), which keeps big batches linear.
                continue
            reserved = None
            if template.limits is not None:
                # the node holds its cheapest option's capacity against the limits; it only
                # launches options no larger than that (see _planned), so the count is exact
                reserved = priced[1][priced[2]][2].capacity
                if not self._within_limits(node, reserved):
                    continue  # planned capacity only grows: treated as permanent too
            if not commit:
                self.pending = (priced[0] - node.price, (node, view, total, reqs, options, reserved, priced))
                return _PLACED
            self._commit(node, view, total, reqs, options, reserved, priced)
            return _PLACED
        return outcome

    def _narrow(self, node: _Node, alt: Requirements) -> tuple[Requirements, list[_Type]] | str:
        template = node.template
        assert template is not None
        reason = node.reqs.compatible(alt, template.allow_undefined)
        if reason is not None:
            return reason
        reqs = node.reqs & alt
        if reqs.infeasible_keys():
            return f"requirements on {', '.join(reqs.infeasible_keys())} cannot be met"
        if reqs == node.reqs:
            return reqs, node.options
        options = [t for t in node.options if _type_ok(t, reqs)]
        if not options:
            return "no instance type left"
        return reqs, options

    def _commit(self, node: _Node, view: _View, total: Vec, reqs: Requirements, options: list[_Type],
                reserved: Vec | None = None, priced: tuple[float, list[Any], int] | None = None) -> None:
        pod = view.pod
        if priced is None:
            priced = self._price_after(node, options, reqs, total)
        if priced is not None:
            node.price, node.price_list, node.price_index = priced
        node.requested = total
        if reqs is not node.reqs and reqs != node.reqs:
            node.reqs = reqs
            node.compat = {}
        if options is not node.options:
            self._set_options(node, options)
        template = node.template
        if template is not None and template.limits is not None and reserved is not None:
            template.reserved = _add(_sub(template.reserved, node.reserved or self.zero), reserved)
            node.reserved = reserved
        node.accel = view.shape.accel
        node.ports.extend(pod.host_ports)
        node.pods.append(pod)
        self._record(pod, node, view.shape)

    def _set_options(self, node: _Node, options: list[_Type]) -> None:
        """Options are the requirement-compatible types (largest first); fit is checked lazily."""
        node.options = options
        node.compat = {}
        cached = self.envelope_cache.get(id(options))
        if cached is None or cached[0] is not options:
            max_alloc, max_capacity = options[0].alloc, options[0].capacity
            for t in options[1:]:
                max_alloc = _vmax(max_alloc, t.alloc)
                max_capacity = _vmax(max_capacity, t.capacity)
            cached = (options, max_alloc, max_capacity)
            self.envelope_cache[id(options)] = cached
        node.max_alloc, node.max_capacity = cached[1], cached[2]

    def _open(self, view: _View, cons: list[_Constraint], alternatives: list[Requirements], template: _Template) -> str | None:
        pod = view.pod
        reason = tolerates_all(pod.tolerations, template.taints, view.prefer_no_schedule)
        if reason is not None:
            return reason
        last = "no compatible requirements"
        for alt in alternatives:
            reason = template.compat_cache.get(alt, "?")
            if reason == "?":
                reason = template.reqs.compatible(alt, template.allow_undefined)
                if reason is None and (template.reqs & alt).infeasible_keys():
                    reason = "requirements cannot be met together"
                template.compat_cache[alt] = reason
            if reason is not None:
                last = f"incompatible requirements, {reason}"
                continue
            reqs = template.reqs & alt
            tkey = (reqs, view.shape.accel)
            types = template.types_cache.get(tkey)
            if types is None:
                types = [t for t in template.types if t.accel == view.shape.accel and _type_ok(t, reqs)]
                template.types_cache[tkey] = types
            if not types:
                last = _no_type_reason(template, reqs, view.shape.accel)
                continue
            fkey = (reqs, view.shape.accel, view.vec)
            options = template.fit_cache.get(fkey)
            if options is None:
                options = _fitting(types, view.vec)
                template.fit_cache[fkey] = options
            if not options:
                last = f"no instance type has room for the pod's requests {_fmt(pod.requests)} plus DaemonSet overhead"
                continue
            if any(pod.host_ports):
                options = [t for t in options if not any(hp.conflicts(o) for hp in pod.host_ports for o in t.ds_ports)]
                if not options:
                    last = "host port already used by a DaemonSet"
                    continue
            if template.limits is not None:
                budget = _sub(_sub(template.limits, template.usage), template.reserved)
                if not any(_fits_named(t.capacity, budget, template, self.dims) for t in options):
                    last = (f"would exceed limits of provisioner {template.provisioner.name} "
                            f"({_limits_text(template, self.dims)}; the smallest instance type that fits "
                            f"the pod adds {_smallest_addition(options, template, self.dims)})")
                    continue
            node = _Node(index=len(self.new_nodes), hostname=f"planned-node-{len(self.new_nodes)}",
                         reqs=template.reqs, taints=template.taints, requested=self.zero, ports=[], pods=[],
                         template=template)
            self._set_options(node, options)

            def possible(key: str, opts: list[_Type] = options, r: Requirements = reqs) -> frozenset[str]:
                return self._domains_of(opts, r, key)

            topo_reason, pins, _ = self.topology(view, cons, node, alt, possible)
            if topo_reason is not None:
                last = topo_reason
                continue
            if pins:
                reqs, options = self._pinned(reqs, options, pins)
                if not options:
                    last = "no instance type offers the topology domain"
                    continue
            node.reqs = reqs
            self._set_options(node, options)
            reserved = None
            priced = self._price_after(node, options, reqs, view.vec)
            if template.limits is not None and priced is not None:
                if not self._within_limits(node, priced[1][priced[2]][2].capacity):
                    options = [t for t in options if self._within_limits(node, t.capacity)]
                    priced = self._price_after(node, options, reqs, view.vec) if options else None
                    if priced is None:
                        last = (f"would exceed limits of provisioner {template.provisioner.name} "
                                f"({_limits_text(template, self.dims)})")
                        continue
                    self._set_options(node, options)
                reserved = priced[1][priced[2]][2].capacity
            if priced is None:
                last = "no instance type offers the topology domain"
                continue
            self.new_nodes.append(node)
            self._commit(node, view, view.vec, reqs, options, reserved, priced)
            return None
        return last

    # ------------------------------------------------------------------ solve
    def solve(self) -> Plan:
        views: list[_View] = []
        for pod in self.input.pods:
            if pod.node_name or pod.nominated_node_name or pod.phase in ("Succeeded", "Failed"):
                continue
            views.append(_View(pod, self.vec(pod.requests), self.shape_of(pod)))
        views.sort(key=lambda v: (-v.pod.requests.get(CPU), -v.pod.requests.get(MEMORY),
                                  v.pod.creation_timestamp, v.pod.uid, v.pod.namespace, v.pod.name))
        queue = deque(views)
        errors: dict[int, str] = {}
        stalled = 0
        # A pod identical in shape, requests and relaxation to one that just failed fails too
        # while nothing has been placed since: remembered per placement count, so a batch
        # that overruns a limit does not retry every node for each of its pods.
        failed: dict[tuple[Any, ...], str] = {}
        placed = 0
        while queue and stalled < len(queue):
            view = queue.popleft()
            fkey = (id(view.shape), view.vec, view.relaxed_pod_affinity, view.relaxed_pod_anti,
                    view.relaxed_node_affinity, view.relaxed_spread, view.prefer_no_schedule, placed)
            error = failed.get(fkey)
            if error is None:
                error = self.add(view)
            if error is None:
                errors.pop(id(view), None)
                stalled = 0
                placed += 1
                continue
            failed[fkey] = error
            errors[id(view)] = error
            queue.append(view)
            stalled = 0 if view.relax() is not None else stalled + 1
        unschedulable = tuple(PodError(v.pod, errors[id(v)]) for v in queue)
        return Plan(
            new_nodes=tuple(self._planned(n) for n in self.new_nodes),
            existing=tuple(ExistingPlacement(n.hostname if n.existing is None else n.existing.name, tuple(n.pods))
                           for n in self.nodes if n.pods),
            unschedulable=unschedulable,
        )

    def _by_price(self, options: list[_Type], reqs: Requirements) -> list[tuple[float, str, _Type, Offering]]:
        """``options`` with their cheapest allowed offering, cheapest first (cached per list and zone/capacity type)."""
        pkey = (id(options), reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE))
        cached = self.price_cache.get(pkey)
        if cached is None or cached[0] is not options:
            priced = []
            for t in options:
                offering = t.cheapest(reqs)
                if offering is not None:
                    priced.append((offering.price, t.it.name, t, offering))
            priced.sort(key=lambda x: (x[0], x[1]))
            cached = (options, priced)
            self.price_cache[pkey] = cached
        return cached[1]

    def _price_after(self, node: _Node, options: list[_Type], reqs: Requirements,
                     total: Vec) -> tuple[float, list[Any], int] | None:
        """(price, price list, index) of the cheapest option holding ``total``; None when none does.

        The scan resumes where the node's last one stopped: a type too small for fewer pods is
        too small for more, so each node's scans add up to one pass over its options.
        """
        by_price = self._by_price(options, reqs)
        start = node.price_index if by_price is node.price_list else 0
        for i in range(start, len(by_price)):
            if all(map(le, total, by_price[i][2].alloc)):
                return by_price[i][0], by_price, i
        return None

    def _standalone(self, view: _View, template: _Template, alt: Requirements) -> float:
        """Price of the cheapest node of ``template`` for this pod alone (inf when none)."""
        key = (template.index, alt, view.shape.accel, view.vec)
        found = self.standalone_cache.get(key)
        if found is None:
            reqs = template.reqs & alt
            types = [t for t in template.types if t.accel == view.shape.accel and _type_ok(t, reqs)]
            prices = [o.price for t in types if _fits(view.vec, t.alloc) for o in (t.cheapest(reqs),) if o]
            found = min(prices, default=float("inf"))
            self.standalone_cache[key] = found
        return found

    def _launch_options(self, options: list[_Type], reqs: Requirements,
                        total: Vec) -> list[tuple[float, str, _Type, Offering]]:
        """The (at most 60) cheapest options that hold ``total``: what a launch would ask EC2 for."""
        chosen = []
        for entry in self._by_price(options, reqs):
            if all(map(le, total, entry[2].alloc)):
                chosen.append(entry)
                if len(chosen) == MAX_INSTANCE_TYPES:
                    break
        return chosen

    def _domains_of(self, options: list[_Type], reqs: Requirements, key: str) -> frozenset[str]:
        """Values of ``key`` the ``options`` can offer under ``reqs`` (cached).

        A value only a too-small type offers is caught by the fit check after pinning.
        """
        ckey = (id(options), reqs, key)
        cached = self.possible_cache.get(ckey)
        if cached is None or cached[0] is not options:
            cached = (options, frozenset(v for t in options for v in _type_domains(t, reqs, key)))
            self.possible_cache[ckey] = cached
        return cached[1]

    def _pinned(self, reqs: Requirements, options: list[_Type],
                pins: dict[str, str]) -> tuple[Requirements, list[_Type]]:
        """``reqs`` with topology keys pinned, and the options that still offer them (cached)."""
        key = (id(options), reqs, tuple(sorted(pins.items())))
        cached = self.pin_cache.get(key)
        if cached is None or cached[0] is not options:
            pinned = reqs & Requirements(Requirement.of(k, IN, (v,)) for k, v in pins.items())
            cached = (options, pinned, [t for t in options if _type_ok(t, pinned)])
            self.pin_cache[key] = cached
        return cached[1], cached[2]

    def _within_limits(self, node: _Node, capacity: Vec) -> bool:
        """True when holding ``capacity`` for ``node`` keeps its Provisioner within ``limits``."""
        template = node.template
        assert template is not None and template.limits is not None
        budget = _sub(_sub(template.limits, template.usage), _sub(template.reserved, node.reserved or self.zero))
        return _fits_named(capacity, budget, template, self.dims)

    def _limit_envelope(self, node: _Node) -> Vec:
        """Largest allocatable (per resource) among ``node``'s options it may grow into within limits.

        An option qualifies when its capacity of the first limited resource (cpu for the usual
        Provisioner) fits ``limits - usage - (reserved - node.reserved)``, the budget
        :meth:`_within_limits` checks. Every option a placement could pick (narrowed, pinned or
        port-filtered) is one of ``node.options`` and must meet that budget, so a pod whose total
        does not fit this envelope cannot join the node: a necessary condition (exact with one
        limited resource, looser with several), never a wrong refusal. O(log options): the
        options sorted by that capacity with prefix maxima of allocatable are cached per list.
        """
        template = node.template
        assert template is not None and template.limits is not None
        dim = template.limit_dim
        if dim < 0:
            return node.max_alloc
        headroom = template.limits[dim] - template.usage[dim] - template.reserved[dim] + (
            node.reserved[dim] if node.reserved else 0)
        if node.max_capacity[dim] <= headroom:
            return node.max_alloc  # every option is within the limits: nothing to cut
        options = node.options
        cached = self.limit_cache.get((id(options), dim))
        if cached is None or cached[0] is not options:
            ordered = sorted(options, key=lambda t: t.capacity[dim])
            capacities, envelopes = [], []
            envelope = self.zero
            for t in ordered:
                envelope = _vmax(envelope, t.alloc)
                capacities.append(t.capacity[dim])
                envelopes.append(envelope)
            cached = (options, capacities, envelopes)
            self.limit_cache[(id(options), dim)] = cached
        count = bisect_right(cached[1], headroom)
        return cached[2][count - 1] if count else self.zero

    def _planned(self, node: _Node) -> PlannedNode:
        template = node.template
        assert template is not None
        chosen = self._launch_options(node.options, node.reqs, node.requested)
        if template.limits is not None and node.reserved:
            held = node.reserved
            chosen = [e for e in chosen if _fits_named(e[2].capacity, held, template, self.dims)]
        options = tuple(e[2].it for e in chosen)
        offerings = [o for e in chosen for o in e[2].offerings(node.reqs)]
        reqs = node.reqs & Requirements((
            Requirement.of(wk.INSTANCE_TYPE, IN, [it.name for it in options]),
            Requirement.of(wk.ZONE, IN, sorted({o.zone for o in offerings})),
            Requirement.of(wk.CAPACITY_TYPE, IN, sorted({o.capacity_type for o in offerings})),
        ))
        labels = {**reqs.labels(), **template.labels}
        labels.pop(wk.HOSTNAME, None)
        return PlannedNode(
            provisioner=template.provisioner.name,
            pods=tuple(node.pods),
            requirements=reqs,
            instance_type_options=options,
            offering=chosen[0][3],
            price=chosen[0][0],
            labels=labels,
            taints=template.taints,
        )


# =========================================================================== helpers
def _type_domains(t: _Type, reqs: Requirements, key: str) -> set[str]:
    if key in (wk.ZONE, wk.CAPACITY_TYPE):
        offerings = t.offerings(reqs)
        return {o.zone if key == wk.ZONE else o.capacity_type for o in offerings}
    requirement = (reqs & t.it.requirements).get(key)
    if requirement is None or requirement.complement:
        return set()
    return set(requirement.values)


def _type_ok(t: _Type, reqs: Requirements) -> bool:
    return t.it.requirements.intersects(reqs) is None and bool(t.offerings(reqs))


def _labels_satisfy(labels: Mapping[str, str], reqs: Requirements) -> str | None:
    """None when a node with ``labels`` meets ``reqs`` (kube's node affinity match)."""
    for key, requirement in reqs.items():
        value = labels.get(key)
        if value is None:
            if requirement.operator not in (NOT_IN, DOES_NOT_EXIST):
                return f"label {key} is absent, {requirement} required"
        elif not requirement.has(value):
            return f"label {key}={value} does not meet {requirement}"
    return None


def _daemon_matches(ds: Pod, node_reqs: Requirements) -> bool:
    base = Requirements.from_labels(ds.node_selector)
    terms = ds.required_node_affinity or (Requirements(),)
    allow = _LAUNCH_KEYS
    return any(node_reqs.compatible(base & term, allow) is None for term in terms)


def _fits_named(capacity: Vec, budget: Vec, template: _Template, dims: tuple[str, ...]) -> bool:
    for i, name in enumerate(dims):
        if name in template.limit_names and capacity[i] > budget[i]:
            return False
    return True


def _limits_text(template: _Template, dims: tuple[str, ...]) -> str:
    assert template.limits is not None
    parts = []
    for i, name in enumerate(dims):
        if name in template.limit_names:
            used = template.usage[i] + template.reserved[i]
            parts.append(
                f"{name}: {format_quantity(name, used)} in use or planned of "
                f"{format_quantity(name, template.limits[i])}"
            )
    return ", ".join(parts)


def _smallest_addition(options: Sequence[_Type], template: _Template, dims: tuple[str, ...]) -> str:
    """``cpu: 4``: per limited resource, the least capacity any of ``options`` would add to the usage."""
    parts = []
    for i, name in enumerate(dims):
        if name in template.limit_names:
            parts.append(f"{name}: {format_quantity(name, min(t.capacity[i] for t in options))}")
    return ", ".join(parts)


def _fmt(resources: Resources) -> str:
    """``cpu=1500m, memory=1Gi, pods=1``: amounts as Kubernetes quantities, as users read them."""
    return ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(resources.items()))


def _no_type_reason(template: _Template, reqs: Requirements, accel: bool) -> str:
    if not template.types:
        return "no instance type matches the provisioner's requirements"
    if not accel and all(t.accel for t in template.types):
        return "only accelerator instance types are allowed and the pod asks for none"
    if accel and not any(t.accel for t in template.types):
        return "no accelerator instance type for a pod that asks for one"
    return f"no instance type meets {reqs}"


def _topology_reason(key: str, cons: list[_Constraint], owner: bool) -> str:
    kinds = sorted({c.kind for c in cons})
    if owner and not kinds:
        return f"a running pod's anti-affinity on {key} excludes this pod"
    names = {_SPREAD: "topology spread", _AFFINITY: "pod affinity", _ANTI: "pod anti-affinity"}
    return f"would violate {' and '.join(names[k] for k in kinds)} on {key}"


def solve(given: SolverInput) -> Plan:
    """Plan new nodes and placements for ``given.pods`` (see the module docstring).

    Pods bound to a node (``node_name``), being preempted for (``nominated_node_name``) or
    finished are left out of the plan. Raises ValueError only for an invalid Provisioner (an
    unknown requirement operator, a malformed limit).
    """
    return _Solver(given).solve()


def solve_first_fit(given: SolverInput) -> Plan:
    """The plain first-fit-decreasing baseline over the same constraints and options.

    Identical to :func:`solve` except that a planned node accepts any pod that still fits some
    option, however much that raises its price (Karpenter's rule). Benchmarks compare against it.
    """
    return _Solver(given, cost_aware=False).solve()
