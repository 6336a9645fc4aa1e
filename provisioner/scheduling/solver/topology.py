"""Topology: spread constraints, pod affinity and anti-affinity (Karpenter's ``topology.go`` and ``topologygroup.go``).

A :class:`TopologyGroup` counts the pods one selector matches, per domain of one topology key
(a zone, a hostname, any node label). Every group any pending or running pod speaks of is
registered before counting, then running pods are recorded, then each placement records its
pod. A check asks, for a pod on a node, whether each key's domain (or, on a planned node whose
key is still undecided, some value it could take) keeps every constraint, and which value to
pin: the least populated one for spread.

Affinity and anti-affinity (as kube-scheduler's InterPodAffinity and Karpenter apply them):

* affinity: the domain already holds a selected pod; when no pod is selected anywhere yet, a
  pod that matches its own term may start the domain. On an existing node, where the pod is
  bound now, only the pods on existing nodes count: a selected pod the plan puts on a new node
  is not there yet, so kube-scheduler would refuse the existing node (the pod would wait, and
  the room the plan counted on there could go to another pod).
* anti-affinity: the domain holds no selected pod; and symmetrically, a pod selected by a
  running or placed pod's required anti-affinity term may not join that pod's domain.

Spread, as kube-scheduler's PodTopologySpread filters (``podtopologyspread/filtering.go``,
``common.go``): a pod may join domain ``d`` when ``count(d) + (1 if it matches its own
selector) - minimum <= maxSkew``. Only pods of the pod's namespace that the selector matches
count (pods being deleted do not); a node is a domain of the constraint (:class:`DomainFilter`)
when it carries every topology key of the pod's constraints of the same kind (DoNotSchedule or
ScheduleAnyway), when it meets the pod's required node affinity and node selector unless
``nodeAffinityPolicy`` is Ignore, and when the pod tolerates its NoSchedule and NoExecute
taints if ``nodeTaintsPolicy`` is Honor. Only pods on such nodes count. ``minimum`` is the
smallest count over the domains, or 0 while there are fewer domains than ``minDomains``
(default 1). Existing nodes (in flight too; not those being deleted, which are going away)
are domains with the pods on them counted (bound, and nominated there), for the hostname key
too: a pod is never sent to a new node when kube-scheduler would take it on an existing one.

When is a placement judged? Pods the plan puts on existing nodes are bound now, before any
planned node registers, so each is judged as kube-scheduler judges it now: against the
existing nodes alone (:attr:`SpreadView.existing`). Pods planned for new nodes are bound once
their node registers; the planned nodes register in any order, and each registers empty, so the
counts a pod meets then depend on which nodes came first. A plan is one kube-scheduler follows
whatever the order exactly when it holds against the plan's final counts: each planned pod's
domain, filled, stays within ``maxSkew`` of the smallest domain of the finished plan (binding
the pods of the least filled domain first always makes progress, and kube-scheduler retries a
refused pod whenever a matching pod is bound). So a placement on a planned node is judged
against a lower bound of that final minimum (:attr:`SpreadView.planned`):

* a key with few values (zone, capacity type, any label but the hostname): every domain the
  pod could be counted in at the end, with the counts so far (which only grow): the values of
  the existing nodes it admits and every value an admitted Provisioner offers, counted 0 while
  no pod is there. A zone no node is in yet therefore holds the minimum at 0 until the plan
  puts a pod there (kube-scheduler, seeing no node in it, would not count it; the plan
  spreads into it instead of stacking on the zones that have nodes, and stays valid).
* the hostname: each planned node is a domain of its own. Whether a node of the plan may end
  with none of the group's pods decides the rule (:class:`HostnameRule`): when some pending
  pod the group does not select could open a node the constraint admits, the final minimum may
  be 0, and each planned node holds at most ``maxSkew`` matching pods (Karpenter's rule for new
  nodes; the usual case, since a cluster's other nodes and other workloads are domains too).
  When none could, the plan's own counts are taken as they stand (as if every planned node
  were there): a single planned node may take as many pods as fit, since one domain never
  skews, which is what kube-scheduler does with one new node. That is only a guess about the
  final minimum, so the solve checks it at the end (:meth:`Topology.revisions`) and, when a
  placement relied on more than the finished plan's minimum, solves again filling the planned
  nodes evenly (the fewest nodes, at least as many as it used, whose even fill keeps
  ``maxSkew``: 10 pods with room for 7 a node go 5 + 5, not 7 + 3, which strands a pod if the
  node of 3 registers first); if that fails too (other pods opened nodes after all), with 1
  (each planned node holds at least one of the group's pods), which always holds.

ScheduleAnyway constraints are only scored by kube-scheduler (the lower a node's count, the
better), never filtered: so they never keep a pod off an existing node. On planned nodes the
solver holds them like DoNotSchedule ones, as a preference, and drops them when the pod fits
nowhere (:mod:`provisioner.scheduling.solver.preferences`): the plan then spreads as the score
would have, and kube-scheduler, filtering nothing on them, follows it.

Known gaps, both needing pods of one selector with different constraints or sizes: a pod the
selector counts but that does not carry the constraint may join a planned node after the
constrained pods, raising the count they will meet (were it bound first, kube-scheduler would
refuse them there); and a pod the plan puts on an existing node after a larger pod of the
same group was planned for a new node in the same zone raises the count that pod will meet.
The replicas of one workload share constraints and size, and are placed existing nodes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.model.taints import Taint
from provisioner.scheduling.pods import (
    HONOR,
    IGNORE,
    LabelSelector,
    Pod,
    PodAffinityTerm,
    Toleration,
    TopologySpreadConstraint,
    tolerates_all,
)
from provisioner.scheduling.solver.existing import ExistingNode, labels_satisfy
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.templates import NodeTemplate, option_domains

if TYPE_CHECKING:
    from provisioner.scheduling.solver.planned import OpenNode
    from provisioner.scheduling.solver.queue import PodShape


class ConstraintKind(StrEnum):
    SPREAD = "spread"
    AFFINITY = "affinity"
    ANTI_AFFINITY = "anti"


#: The members as module constants (compared with ``is``): looking a member up on its class
#: goes through the enum metaclass, several times slower, and the checks run for every node tried.
SPREAD, AFFINITY, ANTI_AFFINITY = ConstraintKind.SPREAD, ConstraintKind.AFFINITY, ConstraintKind.ANTI_AFFINITY

_KIND_NAMES = {SPREAD: "topology spread", AFFINITY: "pod affinity", ANTI_AFFINITY: "pod anti-affinity"}


class HostnameRule(StrEnum):
    """How a hostname spread view judges pods joining planned nodes (module docstring).

    ``ZERO``: a planned node may end with no matching pod, so the minimum is 0. ``ONE``: every
    planned node it admits holds a pod the group selects, so the minimum is at least
    ``min(1, existing minimum)``. ``AS_PLANNED``: the minimum of the plan so far, checked at
    the end of the solve. ``EVEN``: an earlier solve's ``AS_PLANNED`` minimum was not kept: the
    planned nodes are filled evenly instead (:class:`Even`).
    """

    ZERO = "zero"
    ONE = "one"
    AS_PLANNED = "as planned"
    EVEN = "even"


ZERO, ONE, AS_PLANNED, EVEN = HostnameRule.ZERO, HostnameRule.ONE, HostnameRule.AS_PLANNED, HostnameRule.EVEN

#: A view's identity across solves: (group identity, domain filter).
ViewKey = tuple[Any, ...]


class Even(NamedTuple):
    """An even fill of a view's planned nodes: ``extra`` nodes hold ``base + 1`` matching pods, the others ``base``.

    The nodes fill in the order they are opened; a pod joins while its node stays within that.
    """

    base: int
    extra: int


def even_fill(pods: int, nodes: int, existing: int | None, domains: int, max_skew: int,
              min_domains: int) -> Even | None:
    """The even fill of ``pods`` over the fewest nodes (at least ``nodes``) that keeps ``maxSkew``.

    ``existing``: the smallest count among the existing domains (None: there are none);
    ``domains``: how many existing domains there are. None when no number of nodes up to
    ``pods`` keeps it.
    """
    for count in range(max(nodes, 1), pods + 1):
        base, extra = divmod(pods, count)
        highest = base + (1 if extra else 0)
        if domains + count < min_domains:
            lowest = 0
        else:
            lowest = base if existing is None else min(existing, base)
        if highest - lowest <= max_skew:
            return Even(base, extra)
    return None


@dataclass(frozen=True, slots=True)
class DomainFilter:
    """Which nodes are domains of a spread constraint for one pod (PodTopologySpread's node inclusion).

    ``keys``: labels the node must carry (every topology key of the pod's constraints of the
    same kind: ``nodeLabelsMatchSpreadConstraints``). ``affinity``: the pod's required node
    affinity as alternatives (node selector AND one term), one of which the node must meet;
    None when ``nodeAffinityPolicy`` is Ignore or the pod has none. ``tolerations``: the pod's,
    when ``nodeTaintsPolicy`` is Honor (the node's NoSchedule and NoExecute taints must be
    tolerated); None when Ignore.
    """

    keys: frozenset[str]
    affinity: tuple[Requirements, ...] | None = None
    tolerations: tuple[Toleration, ...] | None = None

    def admits_labels(self, labels: Mapping[str, str], taints: Iterable[Taint]) -> bool:
        """For a node that exists: its labels and the taints that count."""
        for key in self.keys:
            if key not in labels:
                return False
        if self.affinity is not None and all(labels_satisfy(labels, a) is not None for a in self.affinity):
            return False
        return self.tolerations is None or tolerates_all(self.tolerations, taints) is None

    def admits_template(self, template: NodeTemplate, requirements: Requirements) -> bool:
        """For a node of ``template`` under ``requirements`` (it may meet them: a superset of those that will)."""
        allow = template.allow_undefined
        for key in self.keys:
            if key != wk.HOSTNAME and key not in requirements and key not in allow:
                return False
        if self.affinity is not None and all(requirements.compatible(a, allow) is not None for a in self.affinity):
            return False
        return self.tolerations is None or tolerates_all(self.tolerations, template.taints) is None


def domain_filter(pod: Pod, constraint: TopologySpreadConstraint) -> DomainFilter:
    """The :class:`DomainFilter` of ``constraint`` for ``pod``."""
    keys = frozenset(c.topology_key for c in pod.topology_spread if c.hard == constraint.hard)
    affinity: tuple[Requirements, ...] | None = None
    if constraint.node_affinity_policy == HONOR:
        alternatives = pod.required_affinity
        if not any(len(a) == 0 for a in alternatives):
            affinity = alternatives
    tolerations = pod.tolerations if constraint.node_taints_policy != IGNORE else None
    return DomainFilter(keys, affinity, tolerations)


@dataclass(eq=False, slots=True)
class DomainCounts:
    """Matching pods per domain, and the smallest count, kept as counts only grow.

    ``histogram`` maps a count to how many domains have it, so the minimum moves in O(1).
    """

    counts: dict[str, int] = field(default_factory=dict)
    histogram: dict[int, int] = field(default_factory=dict)
    lowest: int = 0

    def add(self, domain: str) -> None:
        """Make ``domain`` a domain (with no pod) if it is not one yet."""
        if domain not in self.counts:
            self.counts[domain] = 0
            self.histogram[0] = self.histogram.get(0, 0) + 1
            self.lowest = 0

    def increment(self, domain: str, by: int = 1) -> None:
        """Count ``by`` more pods in ``domain`` (added first when new)."""
        self.add(domain)
        histogram = self.histogram
        count = self.counts[domain]
        histogram[count] -= 1
        self.counts[domain] = count + by
        histogram[count + by] = histogram.get(count + by, 0) + 1
        if count == self.lowest:
            lowest = count
            while not histogram.get(lowest):
                lowest += 1
            self.lowest = lowest

    def minimum(self, min_domains: int) -> int:
        """kube-scheduler's global minimum: 0 while there are fewer than ``min_domains`` domains."""
        return 0 if len(self.counts) < min_domains else self.lowest


@dataclass(eq=False, slots=True)
class SpreadView:
    """One spread group as the pods with one :class:`DomainFilter` see it.

    ``existing``: the domains of the existing nodes the filter admits, with the pods on those
    nodes (bound, nominated and placed by the plan): what kube-scheduler sees now. ``planned``:
    those plus the planned nodes it admits and, for a key other than the hostname, every value
    an admitted Provisioner offers: the lower bound of the final minimum (module docstring).
    ``admitted`` caches the filter's verdict per node (a planned node is judged when first
    seen; its requirements only narrow, so that is a superset). ``uses`` holds the
    ``(minDomains, maxSkew)`` of the constraints that read the view; ``relied``, per such pair,
    the largest minimum an ``AS_PLANNED`` placement relied on. ``even`` and ``topped`` (the
    planned nodes holding ``base + 1``): the ``EVEN`` rule.
    """

    key: ViewKey
    group: TopologyGroup
    filter: DomainFilter
    rule: HostnameRule
    even: Even | None = None
    topped: int = 0
    existing: DomainCounts = field(default_factory=DomainCounts)
    planned: DomainCounts = field(default_factory=DomainCounts)
    admitted: dict[object, bool] = field(default_factory=dict)
    uses: set[tuple[int, int]] = field(default_factory=set)
    relied: dict[tuple[int, int], int] = field(default_factory=dict)

    def admits(self, node: TopologyNode) -> bool:
        verdict = self.admitted.get(node)
        if verdict is None:
            if isinstance(node, ExistingNode):
                verdict = self.filter.admits_labels(node.labels, node.taints)
            else:
                planned = cast("OpenNode", node)
                verdict = self.filter.admits_template(planned.template, planned.requirements)
            self.admitted[node] = verdict
        return verdict

    def record(self, node: TopologyNode, domain: str, by: int = 1) -> None:
        if self.admits(node):
            if isinstance(node, ExistingNode):
                self.existing.increment(domain, by)
            self.planned.increment(domain, by)
            if self.even is not None and not isinstance(node, ExistingNode):
                count = self.planned.counts[domain]
                if count - by <= self.even.base < count:
                    self.topped += 1

    def planned_minimum(self, min_domains: int, domain: str) -> int:
        """The minimum a pod joining planned ``domain`` is judged against (module docstring)."""
        planned = self.planned
        if self.group.key != wk.HOSTNAME:
            return planned.minimum(min_domains)
        if domain not in planned.counts:
            return 0  # the node being opened: it registers empty
        rule = self.rule
        if rule is ZERO or len(planned.counts) < min_domains:
            return 0
        if rule is ONE:
            return min(self.existing.lowest, 1) if self.existing.counts else 1
        return planned.lowest

    def within_even(self, count: int) -> bool:
        """Under ``EVEN``: whether a planned node may hold ``count`` matching pods."""
        assert self.even is not None
        base, extra = self.even
        return count <= base or (count == base + 1 and self.topped < extra)

    def revision(self) -> tuple[bool, Even | None]:
        """After a solve: whether the plan kept what the view relied on, and if not, the rule for the next solve.

        ``AS_PLANNED`` fails when a placement relied on a larger minimum than the finished plan
        has; the next solve fills the planned nodes evenly (:func:`even_fill` over the nodes
        and pods this one used), or takes the view as ``ONE`` (None) when no even fill keeps
        ``maxSkew``. ``EVEN`` fails when a planned node ends more than ``maxSkew`` above the
        minimum (other pods opened nodes after all): ``ONE`` next.
        """
        existing = self.existing.counts
        planned = [count for domain, count in self.planned.counts.items() if domain not in existing]
        if self.rule is AS_PLANNED:
            unkept = [(md, skew) for (md, skew), relied in self.relied.items() if relied > self.planned.minimum(md)]
            if not unkept:
                return True, None
            min_domains = max(md for md, _ in unkept)
            max_skew = min(skew for _, skew in unkept)
            return False, even_fill(sum(planned), len(planned), self.existing.lowest if existing else None,
                                    len(existing), max_skew, min_domains)
        if self.rule is EVEN and planned:
            highest = max(planned)
            if any(highest - self.planned.minimum(md) > skew for md, skew in self.uses):
                return False, None
        return True, None


@dataclass(eq=False, slots=True)
class TopologyGroup:
    """Pods matching ``selector`` in ``namespaces`` (or all namespaces), counted per domain of ``key``.

    ``counts`` and ``total`` cover every node (existing and planned); ``existing_counts`` and
    ``existing_total`` the existing nodes alone (what kube-scheduler sees before any planned
    node registers: the pods bound or nominated there and those the plan puts there). ``owners`` holds the
    domains of pods carrying a required anti-affinity term of this group (a pod the term
    selects may not join those domains: anti-affinity is symmetric). A spread group also counts
    per node (``node_counts``) and keeps its :class:`SpreadView` values up to date.
    """

    key: str
    namespaces: frozenset[str]
    all_namespaces: bool
    selector: LabelSelector
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    existing_counts: dict[str, int] = field(default_factory=dict)
    existing_total: int = 0
    owners: set[str] = field(default_factory=set)
    node_counts: dict[object, int] | None = None
    views: list[SpreadView] = field(default_factory=list)

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if not self.all_namespaces and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)

    def record(self, domain: str, node: TopologyNode) -> None:
        self.counts[domain] = self.counts.get(domain, 0) + 1
        self.total += 1
        if isinstance(node, ExistingNode):
            self.existing_counts[domain] = self.existing_counts.get(domain, 0) + 1
            self.existing_total += 1
        if self.node_counts is not None:
            self.node_counts[node] = self.node_counts.get(node, 0) + 1
            for view in self.views:
                view.record(node, domain)


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """One constraint of a pod on one group; ``self_match``: the pod is selected by it itself.

    Spread constraints carry their :class:`SpreadView` and ``min_domains``. ``hard``: kube-scheduler
    filters on it (DoNotSchedule, a required term); a preference (ScheduleAnyway, a preferred
    term) only holds on new nodes.
    """

    kind: ConstraintKind
    group: TopologyGroup
    max_skew: int = 1
    self_match: bool = False
    view: SpreadView | None = None
    min_domains: int = 1
    hard: bool = True


class TopologyNode(Protocol):
    """A node as topology sees it: its value (domain) for a key, None while undecided or absent."""

    def domain(self, key: str) -> str | None: ...


class TopologyCheck(NamedTuple):
    """The answer for one pod on one node.

    ``reason``: None when allowed; ``pins``: the value chosen for each undecided key;
    ``permanent``: the refusal cannot go away as the plan grows.
    """

    reason: str | None
    pins: Mapping[str, str]
    permanent: bool


#: Allowed, nothing to pin (shared: nothing may change it).
_ALLOWED = TopologyCheck(None, MappingProxyType({}), False)


#: Values an undecided key of a node may still take: given per node by the caller.
PossibleValues = Callable[[str], Iterable[str]]


@dataclass(frozen=True, slots=True)
class _PendingKind:
    """What decides whether a pending pod could open a node a spread view admits, and be counted there."""

    namespace: str
    labels: frozenset[tuple[str, str]]
    alternatives: tuple[Requirements, ...]


class Topology:
    """The topology groups of one solve, and the checks and records against them.

    ``templates`` give the values a spread key may take on new nodes; ``existing`` and
    ``planned`` (the solve's list of planned nodes, which grows) the nodes that are domains;
    ``pending`` the pods to place (which may open nodes). ``learnt`` comes from earlier solves
    of the same input (:meth:`revisions`): view key -> the even fill to use, or None to take the
    view as ``ONE``.
    """

    def __init__(self, templates: Sequence[NodeTemplate], existing: Sequence[ExistingNode],
                 planned: Sequence[OpenNode], pending: Iterable[Pod], memo: Memo,
                 learnt: Mapping[ViewKey, Even | None] | None = None) -> None:
        self.templates = templates
        self.existing = existing
        self.planned = planned
        self.memo = memo
        self.groups: dict[tuple[Any, ...], TopologyGroup] = {}
        self.views: dict[ViewKey, SpreadView] = {}
        self.learnt = learnt or {}
        kinds: dict[tuple[Any, ...], _PendingKind] = {}
        for pod in pending:
            identity = (pod.namespace, frozenset(pod.labels.items()), pod.base_requirements, pod.required_node_affinity)
            if identity not in kinds:
                base = pod.base_requirements
                kinds[identity] = _PendingKind(pod.namespace, identity[1],
                                               tuple(base & t for t in pod.required_node_affinity) or (base,))
        self.pending_kinds = tuple(kinds.values())

    # ------------------------------------------------------------------ groups
    def group(self, kind: ConstraintKind, key: str, namespaces: frozenset[str], all_namespaces: bool,
              selector: LabelSelector) -> TopologyGroup:
        identity = (kind, key, namespaces, all_namespaces, selector)
        group = self.groups.get(identity)
        if group is None:
            group = TopologyGroup(key, namespaces, all_namespaces, selector,
                                  node_counts={} if kind is SPREAD else None)
            self.groups[identity] = group
        return group

    def term_group(self, kind: ConstraintKind, term: PodAffinityTerm) -> TopologyGroup:
        return self.group(kind, term.topology_key, term.namespaces, term.all_namespaces, term.selector)

    def spread_group(self, pod: Pod, constraint: TopologySpreadConstraint) -> TopologyGroup:
        return self.group(SPREAD, constraint.topology_key, frozenset({pod.namespace}), False,
                          constraint.selector)

    def register(self, pods: Iterable[Pod]) -> None:
        """Create every group any of ``pods`` speaks of (do this for all pods before recording)."""
        for pod in pods:
            for c in pod.topology_spread:
                self.spread_group(pod, c)
            for t in pod.pod_affinity + pod.preferred_pod_affinity:
                self.term_group(AFFINITY, t)
            for t in pod.pod_anti_affinity + pod.preferred_pod_anti_affinity:
                self.term_group(ANTI_AFFINITY, t)

    def selecting(self, namespace: str, labels: Mapping[str, str]) -> tuple[TopologyGroup, ...]:
        """The groups that count a pod of ``namespace`` with ``labels``, in registration order."""
        return tuple(g for g in self.groups.values() if g.selects(namespace, labels))

    def anti_affinity_groups(self, pod: Pod) -> tuple[TopologyGroup, ...]:
        """The groups of the pod's required anti-affinity terms (it owns its domain in them)."""
        return tuple(self.term_group(ANTI_AFFINITY, t) for t in pod.pod_anti_affinity)

    # ------------------------------------------------------------------ spread views
    def view(self, pod: Pod, constraint: TopologySpreadConstraint) -> SpreadView:
        """The :class:`SpreadView` of ``constraint`` for ``pod`` (built on first use from the counts so far)."""
        group = self.spread_group(pod, constraint)
        filter_ = domain_filter(pod, constraint)
        key = ((SPREAD, group.key, group.namespaces, group.all_namespaces, group.selector), filter_)
        found = self.views.get(key)
        if found is not None:
            return found
        even = self.learnt.get(key)
        if group.key != wk.HOSTNAME:
            rule = ZERO  # not used: keys with few values take the offered domains
        elif self._zero_possible(group, filter_):
            rule = ZERO
        elif key not in self.learnt:
            rule = AS_PLANNED
        else:
            rule = ONE if even is None else EVEN
        view = SpreadView(key, group, filter_, rule, even)
        for node in self.existing:
            domain = node.domain(group.key)
            if domain is not None and view.admits(node):
                view.existing.add(domain)
                view.planned.add(domain)
        if group.key == wk.HOSTNAME:
            for planned in self.planned:
                if view.admits(planned):
                    view.planned.add(planned.hostname)
        else:
            for value in self.offered(filter_, group.key):
                view.planned.add(value)
        assert group.node_counts is not None
        for counted, count in group.node_counts.items():
            where = cast("TopologyNode", counted)
            domain = where.domain(group.key)
            if domain is not None:
                view.record(where, domain, count)
        group.views.append(view)
        self.views[key] = view
        return view

    def _zero_possible(self, group: TopologyGroup, filter_: DomainFilter) -> bool:
        """Whether some pending pod ``group`` does not select could open a node ``filter_`` admits."""
        for kind in self.pending_kinds:
            if group.selects(kind.namespace, dict(kind.labels)):
                continue
            if filter_.affinity is None:
                return True
            if any(a.intersects(b) is None for a in kind.alternatives for b in filter_.affinity):
                return True
        return False

    def offered(self, filter_: DomainFilter, key: str) -> frozenset[str]:
        """Values of ``key`` the Provisioners ``filter_`` admits offer on new nodes (each option's offerings)."""
        memo_key = (filter_, key)
        cached = self.memo.spread_domains.get(memo_key)
        if cached is not None:
            return cached
        values: set[str] = set()
        for t in self.templates:
            for alternative in filter_.affinity or (Requirements(),):
                if t.requirements.compatible(alternative, t.allow_undefined) is not None:
                    continue
                node_requirements = t.requirements & alternative
                if not filter_.admits_template(t, node_requirements):
                    continue
                for option in t.options:
                    values.update(v for v in option_domains(self.memo, option, node_requirements, key)
                                  if alternative.has(key, v))
        result = frozenset(values)
        self.memo.spread_domains[memo_key] = result
        return result

    def add_node(self, node: OpenNode) -> None:
        """A planned node was opened: it is one more domain of every hostname view that admits it."""
        for view in self.views.values():
            if view.group.key == wk.HOSTNAME and view.admits(node):
                view.planned.add(node.hostname)

    def note_placement(self, constraints: Iterable[TopologyConstraint], node: OpenNode) -> None:
        """Remember the minimum each ``AS_PLANNED`` hostname constraint relies on for a pod joining ``node``."""
        for c in constraints:
            view = c.view
            if view is not None and view.rule is AS_PLANNED and view.group.key == wk.HOSTNAME:
                minimum = view.planned_minimum(c.min_domains, node.hostname)
                relied = (c.min_domains, c.max_skew)
                if minimum > view.relied.get(relied, 0):
                    view.relied[relied] = minimum

    def revisions(self) -> dict[ViewKey, Even | None]:
        """The hostname views whose rule the finished plan did not keep: view key -> the rule for the next solve."""
        revised: dict[ViewKey, Even | None] = {}
        for key, view in self.views.items():
            kept, even = view.revision()
            if not kept:
                revised[key] = even
        return revised

    # ------------------------------------------------------------------ records
    def record(self, pod: Pod, node: TopologyNode, shape: PodShape | None = None) -> None:
        """Count ``pod`` on ``node`` (``shape`` gives its groups; without it, a running pod's are found).

        A pod a group selects has its node's value of the group's key decided when it joins
        (:meth:`check` pins it), so every placement is counted in its domain.
        """
        groups = self.selecting(pod.namespace, pod.labels) if shape is None else shape.selected_by
        for g in groups:
            domain = node.domain(g.key)
            if domain is not None:
                g.record(domain, node)
        owned = self.anti_affinity_groups(pod) if shape is None else shape.anti_affinity_groups
        for g in owned:
            domain = node.domain(g.key)
            if domain is not None:
                g.owners.add(domain)

    def constraints(self, pod: Pod, spread: Iterable[TopologySpreadConstraint],
                    affinity: Iterable[PodAffinityTerm],
                    anti_affinity: Iterable[PodAffinityTerm]) -> list[TopologyConstraint]:
        """The pod's constraints for the spread, affinity and anti-affinity terms it still holds."""
        out = []
        for c in spread:
            view = self.view(pod, c)
            view.uses.add((c.min_domains, c.max_skew))
            out.append(TopologyConstraint(SPREAD, view.group, c.max_skew, c.selector.matches(pod.labels), view,
                                          c.min_domains, c.hard))
        for t in affinity:
            out.append(TopologyConstraint(AFFINITY, self.term_group(AFFINITY, t),
                                          self_match=t.selects(pod.namespace, pod.labels), hard=t.weight is None))
        for t in anti_affinity:
            out.append(TopologyConstraint(ANTI_AFFINITY, self.term_group(ANTI_AFFINITY, t), hard=t.weight is None))
        return out

    # ------------------------------------------------------------------ checks
    def check(self, shape: PodShape, constraints: list[TopologyConstraint], node: TopologyNode,
              possible: PossibleValues) -> TopologyCheck:
        """Whether a pod of ``shape`` with ``constraints`` may join ``node``, and where.

        Every key the pod's constraints speak of, and every key of a group that selects it or
        that it owns, is checked, in that order (the first key refused names the reason): the
        constraints' keys, those of the groups selecting the pod that have owners, of all groups
        selecting it, then of the groups it owns. ``possible(key)`` gives the values an undecided
        key of the node could still take; the chosen value is returned in ``pins``. On an
        existing node, the preferences (ScheduleAnyway spread, preferred pod affinity and
        anti-affinity terms) are left out: kube-scheduler only scores them.
        """
        exists = isinstance(node, ExistingNode)
        by_key, forbidden = self._keys(shape, constraints, exists)
        pins: dict[str, str] = {}
        for key, key_constraints in by_key.items():
            domain = node.domain(key)
            if domain is not None:
                refusal = self._decided(key, key_constraints, forbidden, domain, exists)
                if refusal is not None:
                    return refusal
                continue
            candidates = sorted(possible(key))
            if not candidates:
                if key_constraints or key in forbidden:
                    return TopologyCheck(f"no node can carry topology key {key}", {}, True)
                continue
            excluded = forbidden.get(key, ())
            allowed = [v for v in candidates if v not in excluded
                       and all(self.allows(c, v, exists) for c in key_constraints)]
            if not allowed:
                return self._refusal(key, key_constraints, forbidden, domain, exists)
            views = [c.view for c in key_constraints if c.view is not None]
            pins[key] = min(allowed, key=lambda v: (sum(view.planned.counts.get(v, 0) for view in views), v))
        return TopologyCheck(None, pins, False) if pins else _ALLOWED

    def _keys(self, shape: PodShape, constraints: list[TopologyConstraint],
              exists: bool) -> tuple[dict[str, list[TopologyConstraint]], dict[str, set[str]]]:
        """The keys :meth:`check` judges, in its order, with the constraints on each; the forbidden domains.

        ``forbidden``: per key, the domains that owners' anti-affinity forbids.
        """
        by_key: dict[str, list[TopologyConstraint]] = {}
        for c in constraints:
            if exists and not c.hard:
                continue
            by_key.setdefault(c.group.key, []).append(c)
        forbidden: dict[str, set[str]] = {}  # domains that owners' anti-affinity forbids, per key
        for g in shape.selected_by:
            if g.owners:
                forbidden.setdefault(g.key, set()).update(g.owners)
                by_key.setdefault(g.key, [])
        for g in shape.selected_by:
            by_key.setdefault(g.key, [])
        for g in shape.anti_affinity_groups:
            by_key.setdefault(g.key, [])
        return by_key, forbidden

    def _decided(self, key: str, key_constraints: list[TopologyConstraint], forbidden: dict[str, set[str]],
                 domain: str, exists: bool) -> TopologyCheck | None:
        """None when a node whose ``key`` is ``domain`` keeps every constraint on ``key``; else the refusal."""
        if domain not in forbidden.get(key, ()) and all(self.allows(c, domain, exists) for c in key_constraints):
            return None
        return self._refusal(key, key_constraints, forbidden, domain, exists)

    def decided_domains(self, shape: PodShape, constraints: list[TopologyConstraint]) -> DecidedDomains | None:
        """What :meth:`check` answers on planned nodes from the keys they have decided, for one pod.

        See :class:`DecidedDomains`; None when the pod has no topology key to check.
        """
        by_key, forbidden = self._keys(shape, constraints, False)
        return DecidedDomains(self, by_key, forbidden) if by_key else None

    def _refusal(self, key: str, key_constraints: list[TopologyConstraint], forbidden: dict[str, set[str]],
                 domain: str | None, exists: bool) -> TopologyCheck:
        """No value of ``key`` is allowed: why, and whether that lasts.

        It lasts when the node's domain is decided and excluded by an owner's anti-affinity, by
        the pod's own anti-affinity, or by hostname spread once there are ``minDomains``
        domains: the node's count only grows, and the minimum rises only when the least filled
        domain fills, which first-fit reaches last (the newest planned node); a node that refused
        could take a pod again only in between.
        """
        permanent = domain is not None and (
            domain in forbidden.get(key, ())
            or any((c.kind is ANTI_AFFINITY
                    or (c.kind is SPREAD and key == wk.HOSTNAME and c.view is not None
                        and len(c.view.planned.counts) >= c.min_domains))
                   and not self.allows(c, domain, exists) for c in key_constraints))
        return TopologyCheck(topology_reason(key, key_constraints, key in forbidden), {}, permanent)

    def allows(self, constraint: TopologyConstraint, value: str, exists: bool) -> bool:
        """True when a pod in domain ``value`` keeps ``constraint`` (``exists``: on an existing node, bound now)."""
        group = constraint.group
        if constraint.kind is ANTI_AFFINITY:
            return group.counts.get(value, 0) == 0
        if constraint.kind is AFFINITY:
            # on an existing node the pod is bound now: only the pods on existing nodes are there
            # to be with (those planned for new nodes are bound once their nodes register)
            total, counts = (group.existing_total, group.existing_counts) if exists else (group.total, group.counts)
            if total == 0:
                return constraint.self_match
            return counts.get(value, 0) > 0
        view = constraint.view
        assert view is not None
        if exists:
            scope = view.existing
            minimum = scope.minimum(constraint.min_domains)
        else:
            scope = view.planned
            if view.rule is EVEN and view.group.key == wk.HOSTNAME:
                return view.within_even(scope.counts.get(value, 0) + (1 if constraint.self_match else 0))
            minimum = view.planned_minimum(constraint.min_domains, value)
        count = scope.counts.get(value, 0)
        return count + (1 if constraint.self_match else 0) - minimum <= constraint.max_skew


class DecidedDomains:
    """:meth:`Topology.check`'s refusals of planned nodes by the keys they have decided, for one pod.

    A planned node's hostname is decided, and so is its zone once a pod pinned one; whether a
    pod may join a node whose ``key`` is ``value`` depends only on the pod, its constraints and
    the counts, not on the node, so it is answered once per (key, value) and reused for every
    node of that domain. Valid while the counts do not change: the solver makes one per pod
    and scan of the planned nodes (placements are recorded after the scan).

    :meth:`refusal` is exact where it answers: a node it refuses is refused by ``check`` (which
    refuses when any key has no allowed value); and when every key ``check`` judges before the
    refusing one is decided on the node too, ``check`` returns that very refusal (its
    ``permanent`` included) whatever requirement alternative it is called under, since decided
    keys do not depend on the node's options.
    """

    def __init__(self, topology: Topology, by_key: dict[str, list[TopologyConstraint]],
                 forbidden: dict[str, set[str]]) -> None:
        self._topology = topology
        self._by_key = by_key
        self._forbidden = forbidden
        self._answers: dict[tuple[str, str], TopologyCheck | None] = {}

    def refusal(self, node: TopologyNode) -> tuple[TopologyCheck, bool] | None:
        """The refusal of the first decided key of ``node`` that refuses the pod, and whether ``check`` gives it.

        ``check`` gives that very refusal when no undecided key comes before it. When every key
        is decided and none refuses, ``check``'s own answer: allowed, no pins (``_ALLOWED``, True).
        None when no decided key refuses and some key is undecided.
        """
        exact = True
        for key, key_constraints in self._by_key.items():
            domain = node.domain(key)
            if domain is None:
                exact = False
                continue
            answer_key = (key, domain)
            if answer_key in self._answers:
                answer = self._answers[answer_key]
            else:
                answer = self._topology._decided(key, key_constraints, self._forbidden, domain, False)
                self._answers[answer_key] = answer
            if answer is not None:
                return answer, exact
        return (_ALLOWED, True) if exact else None


def topology_reason(key: str, constraints: list[TopologyConstraint], owner: bool) -> str:
    """``would violate pod affinity on <key>``, naming every kind of constraint on the key."""
    kinds = sorted({c.kind for c in constraints})
    if owner and not kinds:
        return f"a running pod's anti-affinity on {key} excludes this pod"
    return f"would violate {' and '.join(_KIND_NAMES[k] for k in kinds)} on {key}"
