"""Topology: spread constraints, pod affinity and anti-affinity (Karpenter's ``topology.go`` and ``topologygroup.go``).

A :class:`TopologyGroup` counts the pods one selector matches, per domain of one topology key
(a zone, a hostname, any node label). Every group any pending or running pod speaks of is
registered before counting, then running pods are recorded, then each placement records its
pod. A check asks, for a pod on a node, whether each key's domain (or, on a planned node whose
key is still undecided, some value it could take) keeps every constraint, and which value to
pin: the least populated one for spread.

Rules (as kube-scheduler and Karpenter apply them):

* spread: ``count(domain) + 1 (when the pod matches its own selector) - min count over eligible
  domains <= maxSkew``; eligible domains are those the pod's requirements allow that some
  template or existing node offers. For hostname spread the minimum is 0 (a new node is always
  possible).
* affinity: the domain already holds a selected pod; when no pod is selected anywhere yet, a
  pod that matches its own term may start the domain.
* anti-affinity: the domain holds no selected pod; and symmetrically, a pod selected by a
  running or placed pod's required anti-affinity term may not join that pod's domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.scheduling.pods import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from provisioner.scheduling.solver.existing import labels_satisfy
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.templates import NodeTemplate, option_domains

if TYPE_CHECKING:
    from provisioner.scheduling.solver.queue import PodShape


class ConstraintKind(StrEnum):
    SPREAD = "spread"
    AFFINITY = "affinity"
    ANTI_AFFINITY = "anti"


#: The members as module constants (compared with ``is``): looking a member up on its class
#: goes through the enum metaclass, several times slower, and the checks run for every node tried.
SPREAD, AFFINITY, ANTI_AFFINITY = ConstraintKind.SPREAD, ConstraintKind.AFFINITY, ConstraintKind.ANTI_AFFINITY

_KIND_NAMES = {SPREAD: "topology spread", AFFINITY: "pod affinity", ANTI_AFFINITY: "pod anti-affinity"}


@dataclass(eq=False, slots=True)
class TopologyGroup:
    """Pods matching ``selector`` in ``namespaces`` (or all namespaces), counted per domain of ``key``.

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


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """One constraint of a pod on one group; ``self_match``: the pod is selected by it itself."""

    kind: ConstraintKind
    group: TopologyGroup
    max_skew: int = 1
    self_match: bool = False


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


class Topology:
    """The topology groups of one solve, and the checks and records against them.

    ``templates`` and ``existing_labels`` (the labels of each existing node) give the domains a
    spread constraint counts as eligible.
    """

    def __init__(self, templates: Sequence[NodeTemplate], existing_labels: Sequence[Mapping[str, str]],
                 memo: Memo) -> None:
        self.templates = templates
        self.existing_labels = existing_labels
        self.memo = memo
        self.groups: dict[tuple[Any, ...], TopologyGroup] = {}

    # ------------------------------------------------------------------ groups
    def group(self, kind: ConstraintKind, key: str, namespaces: frozenset[str], all_namespaces: bool,
              selector: LabelSelector) -> TopologyGroup:
        identity = (kind, key, namespaces, all_namespaces, selector)
        group = self.groups.get(identity)
        if group is None:
            group = TopologyGroup(key, namespaces, all_namespaces, selector)
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

    def record(self, pod: Pod, node: TopologyNode, shape: PodShape | None = None) -> None:
        """Count ``pod`` on ``node`` (``shape`` gives its groups; without it, a running pod's are found)."""
        groups = self.selecting(pod.namespace, pod.labels) if shape is None else shape.selected_by
        for g in groups:
            domain = node.domain(g.key)
            if domain is not None:
                g.record(domain)
        owned = self.anti_affinity_groups(pod) if shape is None else shape.anti_affinity_groups
        for g in owned:
            domain = node.domain(g.key)
            if domain is not None:
                g.owners.add(domain)

    def constraints(self, pod: Pod, spread: Iterable[TopologySpreadConstraint],
                    affinity: Iterable[PodAffinityTerm],
                    anti_affinity: Iterable[PodAffinityTerm]) -> list[TopologyConstraint]:
        """The pod's constraints for the spread, affinity and anti-affinity terms it still holds."""
        out = [TopologyConstraint(SPREAD, self.spread_group(pod, c), c.max_skew,
                                  c.selector.matches(pod.labels)) for c in spread]
        for t in affinity:
            out.append(TopologyConstraint(AFFINITY, self.term_group(AFFINITY, t),
                                          self_match=t.selects(pod.namespace, pod.labels)))
        for t in anti_affinity:
            out.append(TopologyConstraint(ANTI_AFFINITY,
                                          self.term_group(ANTI_AFFINITY, t)))
        return out

    # ------------------------------------------------------------------ checks
    def check(self, shape: PodShape, constraints: list[TopologyConstraint], node: TopologyNode,
              requirements: Requirements, possible: PossibleValues) -> TopologyCheck:
        """Whether a pod of ``shape`` with ``constraints`` and ``requirements`` may join ``node``, and where.

        Every key the pod's constraints speak of, and every key of a group that selects it or
        that it owns, is checked, in that order (the first key refused names the reason): the
        constraints' keys, those of the groups selecting the pod that have owners, of all groups
        selecting it, then of the groups it owns. ``possible(key)`` gives the values an undecided
        key of the node could still take; the chosen value is returned in ``pins``.
        """
        by_key: dict[str, list[TopologyConstraint]] = {}
        for c in constraints:
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
        pins: dict[str, str] = {}
        for key, key_constraints in by_key.items():
            domain = node.domain(key)
            candidates: list[str]
            if domain is not None:
                candidates = [domain]
            else:
                candidates = sorted(possible(key))
                if not candidates:
                    if key_constraints or key in forbidden:
                        return TopologyCheck(f"no node can carry topology key {key}", {}, True)
                    continue
            excluded = forbidden.get(key, ())
            allowed = [v for v in candidates if v not in excluded
                       and all(self.allows(requirements, c, v) for c in key_constraints)]
            if not allowed:
                return self._refusal(key, key_constraints, forbidden, domain, requirements)
            if domain is None:
                spreads = [c.group for c in key_constraints if c.kind is SPREAD]
                pins[key] = min(allowed, key=lambda v: (sum(g.counts.get(v, 0) for g in spreads), v))
        return TopologyCheck(None, pins, False) if pins else _ALLOWED

    def _refusal(self, key: str, key_constraints: list[TopologyConstraint], forbidden: dict[str, set[str]],
                 domain: str | None, requirements: Requirements) -> TopologyCheck:
        """No value of ``key`` is allowed: why, and whether that lasts.

        It lasts when the node's domain is decided and excluded by an owner's anti-affinity, by
        the pod's own anti-affinity or by hostname spread (counts there only grow).
        """
        permanent = domain is not None and (
            domain in forbidden.get(key, ())
            or any((c.kind is ANTI_AFFINITY
                    or (c.kind is SPREAD and key == wk.HOSTNAME))
                   and not self.allows(requirements, c, domain) for c in key_constraints))
        return TopologyCheck(topology_reason(key, key_constraints, key in forbidden), {}, permanent)

    def allows(self, requirements: Requirements, constraint: TopologyConstraint, value: str) -> bool:
        """True when a pod with ``requirements`` in domain ``value`` keeps ``constraint``."""
        group = constraint.group
        count = group.counts.get(value, 0)
        if constraint.kind is ANTI_AFFINITY:
            return count == 0
        if constraint.kind is AFFINITY:
            if group.total == 0:
                return constraint.self_match
            return count > 0
        if group.key == wk.HOSTNAME:
            minimum = 0
        else:
            domains = self.spread_domains(requirements, group.key)
            minimum = min((group.counts.get(d, 0) for d in domains), default=0)
        return count + (1 if constraint.self_match else 0) - minimum <= constraint.max_skew

    def spread_domains(self, requirements: Requirements, key: str) -> frozenset[str]:
        """Domains of ``key`` a pod with ``requirements`` could land in: templates' offerings and existing nodes."""
        memo_key = (requirements, key)
        cached = self.memo.spread_domains.get(memo_key)
        if cached is not None:
            return cached
        values: set[str] = set()
        for t in self.templates:
            if t.requirements.compatible(requirements, t.allow_undefined) is not None:
                continue
            node_requirements = t.requirements & requirements
            for option in t.options:
                values.update(option_domains(self.memo, option, node_requirements, key))
        for labels in self.existing_labels:
            value = labels.get(key)
            if value is not None and labels_satisfy(labels, requirements) is None:
                values.add(value)
        result = frozenset(v for v in values if requirements.has(key, v))
        self.memo.spread_domains[memo_key] = result
        return result


def topology_reason(key: str, constraints: list[TopologyConstraint], owner: bool) -> str:
    """``would violate pod affinity on <key>``, naming every kind of constraint on the key."""
    kinds = sorted({c.kind for c in constraints})
    if owner and not kinds:
        return f"a running pod's anti-affinity on {key} excludes this pod"
    return f"would violate {' and '.join(_KIND_NAMES[k] for k in kinds)} on {key}"
