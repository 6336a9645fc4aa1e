"""Nodes the plan opens and fills (Karpenter's ``nodeclaim.go``).

An :class:`OpenNode` keeps every option (instance type) that still holds all of its pods plus
that option's DaemonSet overhead and still has an allowed offering; a pod joins only if one
remains. The node's requirements narrow as pods join (a zone chosen for topology, a node
selector). Its price is its cheapest option that holds its pods.

Limits: a node holds the capacity of its cheapest fitting option against its Provisioner's
limits (``reserved``); it launches only options no larger than that in any limited resource,
so a burst never overshoots a limit. A node may grow into a larger option only when that option's capacity fits
``limits - usage - reserved by the other planned nodes``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from provisioner.model import labels as wk
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.scheduling.pods import HostPort, Pod, tolerates_all
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.preferences import Alternative
from provisioner.scheduling.solver.pricing import (
    PricedOption,
    PriceFit,
    bulk_price,
    by_price,
    first_fit,
    standalone_price,
)
from provisioner.scheduling.solver.templates import (
    NodeTemplate,
    TypeOption,
    allows,
    any_fits,
    option_domains,
    unmet_at_launch,
    without_port_conflicts,
)
from provisioner.scheduling.solver.topology import Topology, TopologyConstraint
from provisioner.scheduling.solver.vectors import Vector, fits, largest, minus, plus

if TYPE_CHECKING:
    from provisioner.api.types import Taint
    from provisioner.scheduling.solver.queue import PodShape, QueuedPod


class Refusal(StrEnum):
    """Why a planned node does not take a pod, as far as trying it again goes.

    ``PERMANENT``: the reason only gets worse as nodes fill (resources, taints, requirements,
    anti-affinity, host ports, limits, a price above a node of its own), so a pod of the same
    kind need not try this node again. ``FOR_NOW``: a topology count that placing other pods
    may change.
    """

    PERMANENT = "permanent"
    FOR_NOW = "for now"


#: The members as module constants (compared with ``is``): looking a member up on its class goes
#: through the enum metaclass, several times slower, and a refusal is answered for every node tried.
PERMANENT, FOR_NOW = Refusal.PERMANENT, Refusal.FOR_NOW


class Candidate(NamedTuple):
    """A placement of ``queued`` on ``node`` that may be made: what the node becomes with it.

    ``extra_price`` is how much the node's price rises (USD/hour); ``total`` its requests with
    the pod; ``requirements`` and ``options`` what it narrows to; ``reserved`` the capacity it
    then holds against its limits (None: no limits); ``fit`` its cheapest fitting option.
    """

    extra_price: float
    node: OpenNode
    queued: QueuedPod
    total: Vector
    requirements: Requirements
    options: list[TypeOption]
    reserved: Vector | None
    fit: PriceFit


@dataclass(eq=False, slots=True)
class OpenNode:
    """A new node of ``template`` being planned, with the pods placed on it so far.

    ``options`` are sorted largest first; ``max_allocatable`` and ``max_capacity`` are their
    per-resource maxima. ``reserved`` is the capacity the node holds against its Provisioner's
    limits (zero while it holds none). ``accelerator`` is None until a pod joins, then whether
    its pods use accelerators. ``price`` is the USD/hour of ``price_list[price_index]``, the
    cheapest option that holds ``requested``.

    ``bulk_shape``, ``bulk_requests``, ``bulk_price``: a node opened for a run of identical pods
    (:func:`~provisioner.scheduling.solver.pricing.bulk_price`) grows by pods of that shape and
    requests while its price stays at most ``bulk_price`` USD/hour; other pods, and those pods
    beyond it, keep the marginal rule (:meth:`can_add`). None: opened for a pod alone.
    """

    index: int
    hostname: str
    template: NodeTemplate
    requirements: Requirements
    requested: Vector
    reserved: Vector
    host_ports: list[HostPort] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    options: list[TypeOption] = field(default_factory=list)
    max_allocatable: Vector = ()
    max_capacity: Vector = ()
    accelerator: bool | None = None
    price: float = 0.0
    price_list: list[PricedOption] | None = None
    price_index: int = 0
    bulk_shape: PodShape | None = None
    bulk_requests: Vector = ()
    bulk_price: float = 0.0
    #: :meth:`domain`'s answers for ``_domains_of`` (the requirements they were read from)
    _domains: dict[str, str | None] = field(default_factory=dict)
    _domains_of: Requirements | None = None

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.template.taints

    def domain(self, key: str) -> str | None:
        """The node's value for ``key``; None while it is not decided yet (or absent)."""
        if key == wk.HOSTNAME:
            return self.hostname
        requirements = self.requirements
        if self._domains_of is not requirements:  # requirements are replaced, never mutated
            self._domains, self._domains_of = {}, requirements
        elif key in self._domains:
            return self._domains[key]
        requirement = requirements.get(key)
        value = None
        if requirement is not None and not requirement.complement and len(requirement.values) == 1:
            value = next(iter(requirement.values))
        self._domains[key] = value
        return value

    # ------------------------------------------------------------------ taking a pod
    def can_add(self, queued: QueuedPod, constraints: list[TopologyConstraint], alternatives: list[Alternative],
                topology: Topology, memo: Memo, cost_aware: bool, topology_allows: bool = False) -> Candidate | Refusal:
        """The placement of ``queued`` on this node, or why not.

        With ``cost_aware``, the node also refuses a pod that would raise its price by more than
        the price of a node of its own for that pod, unless the node was opened for a run of
        such pods and stays within its ``bulk_price``. ``topology_allows``: the caller knows the
        topology check allows the pod here with nothing to pin (every key decided), so it is skipped.
        """
        if self.accelerator is not None and self.accelerator != queued.shape.accelerator:
            return PERMANENT
        total = plus(self.requested, queued.requests)
        if not fits(total, self.max_allocatable):
            return PERMANENT
        if self.template.limits is not None and not fits(total, self.limit_envelope(memo)):
            # no option this node may still grow into within the limits holds the pod: refused
            # before topology and pricing, so a Provisioner at its limit refuses every pod cheaply
            return PERMANENT
        pod = queued.pod
        taints = self.template.taints
        if (pod.tolerations != () or taints) and tolerates_all(
                pod.tolerations, taints, queued.relaxation.prefer_no_schedule) is not None:
            return PERMANENT
        if pod.host_ports and any(hp.conflicts(other) for hp in pod.host_ports for other in self.host_ports):
            return PERMANENT
        refusal = PERMANENT
        for alternative in alternatives:
            outcome = self._candidate(queued, constraints, alternative, total, topology, memo, cost_aware,
                                      topology_allows)
            if outcome is FOR_NOW:
                refusal = FOR_NOW
            elif outcome is not PERMANENT:
                return outcome
        return refusal

    def _candidate(self, queued: QueuedPod, constraints: list[TopologyConstraint], alternative: Alternative,
                   total: Vector, topology: Topology, memo: Memo, cost_aware: bool,
                   topology_allows: bool = False) -> Candidate | Refusal:
        """The placement of ``queued`` under one requirement alternative, or why not.

        The node narrows to ``alternative.requirements`` (preferred terms held included);
        topology counts the domains ``alternative.required`` allows, as kube-scheduler does.
        """
        wanted = alternative.requirements
        cached = memo.narrowed.get((self, wanted))
        if cached is None or cached[0] is not self.options or cached[1] is not self.requirements:
            cached = (self.options, self.requirements, self._narrow(wanted, memo))
            memo.narrowed[(self, wanted)] = cached
        narrowed = cached[2]
        if isinstance(narrowed, str):
            return PERMANENT
        requirements, options = narrowed
        if not any_fits(options, total):
            return PERMANENT
        shape = queued.shape
        if not topology_allows and (constraints or shape.selected_by or shape.anti_affinity_groups):
            check = topology.check(shape, constraints, self, lambda key: domains_of(memo, options, requirements, key))
            if check.reason is not None:
                return PERMANENT if check.permanent else FOR_NOW
            if check.pins:
                requirements, options = pin(memo, requirements, options, check.pins)
                if not any_fits(options, total):
                    return PERMANENT
        pod = queued.pod
        if pod.host_ports:
            options = without_port_conflicts(options, pod.host_ports)
            if not any_fits(options, total):
                return PERMANENT
        fit = self.price_with(options, requirements, total, memo)
        if fit is None or (cost_aware and fit.price - self.price > standalone_price(
                memo, self.template, wanted, shape.accelerator, queued.requests) + 1e-9
                and not (shape is self.bulk_shape and fit.price <= self.bulk_price + 1e-9
                         and queued.requests == self.bulk_requests)):
            # growing this node costs more than a node of its own (and, for the run of
            # identical pods it was opened for, more than its bulk price): first-fit would
            # overpay. Counted as permanent for the skip pointer (a heuristic: the node only
            # gets fuller), which keeps big batches linear.
            return PERMANENT
        reserved = None
        if self.template.limits is not None:
            # the node holds its cheapest option's capacity against the limits; it only
            # launches options no larger than that, so the count is exact
            reserved = fit.cheapest.option.capacity
            if not self.within_limits(reserved):
                return PERMANENT  # planned capacity only grows: treated as permanent too
        return Candidate(fit.price - self.price, self, queued, total, requirements, options, reserved, fit)

    def add(self, candidate: Candidate, memo: Memo) -> None:
        """Make ``candidate`` (a placement on this node); record its pod in the topology separately."""
        fit = candidate.fit
        self.price, self.price_list, self.price_index = fit.price, fit.by_price, fit.position
        self.requested = candidate.total
        if candidate.requirements is not self.requirements and candidate.requirements != self.requirements:
            self.requirements = candidate.requirements
        if candidate.options is not self.options:
            self.set_options(candidate.options, memo)
        template = self.template
        if template.limits is not None and candidate.reserved is not None:
            template.reserved = plus(minus(template.reserved, self.reserved), candidate.reserved)
            self.reserved = candidate.reserved
        self.accelerator = candidate.queued.shape.accelerator
        self.host_ports.extend(candidate.queued.pod.host_ports)
        self.pods.append(candidate.queued.pod)

    # ------------------------------------------------------------------ options
    def set_options(self, options: list[TypeOption], memo: Memo) -> None:
        """Keep ``options`` (non-empty, largest first: the requirement-compatible types; fit is checked lazily)."""
        self.options = options
        cached = memo.envelopes.get(id(options))
        if cached is None or cached[0] is not options:
            max_allocatable, max_capacity = options[0].allocatable, options[0].capacity
            for t in options[1:]:
                max_allocatable = largest(max_allocatable, t.allocatable)
                max_capacity = largest(max_capacity, t.capacity)
            cached = (options, max_allocatable, max_capacity)
            memo.envelopes[id(options)] = cached
        self.max_allocatable, self.max_capacity = cached[1], cached[2]

    def _narrow(self, alternative: Requirements, memo: Memo) -> tuple[Requirements, list[TypeOption]] | str:
        """The node's requirements and options narrowed by ``alternative``, or why they cannot be."""
        reason = unmet_at_launch(self.template, self.requirements, alternative)
        if reason is not None:
            return reason
        requirements = self.requirements & alternative
        if requirements.infeasible_keys():
            return f"requirements on {', '.join(requirements.infeasible_keys())} cannot be met"
        if requirements == self.requirements:
            return requirements, self.options
        options = [t for t in self.options if allows(memo, t, requirements)]
        if not options:
            return "no instance type left"
        return requirements, options

    def price_with(self, options: list[TypeOption], requirements: Requirements, total: Vector,
                   memo: Memo) -> PriceFit | None:
        """The cheapest of ``options`` holding ``total`` under ``requirements``; None when none does.

        The scan resumes where the node's last one stopped: a type too small for fewer pods is
        too small for more, so each node's scans add up to one pass over its options.
        """
        priced = by_price(memo, options, requirements)
        return first_fit(priced, total, self.price_index if priced is self.price_list else 0)

    # ------------------------------------------------------------------ limits
    def within_limits(self, capacity: Vector) -> bool:
        """True when holding ``capacity`` for this node keeps its Provisioner within its limits."""
        template = self.template
        assert template.limits is not None
        budget = minus(minus(template.limits, template.usage), minus(template.reserved, self.reserved))
        return template.within(capacity, budget)

    def limit_envelope(self, memo: Memo) -> Vector:
        """Largest allocatable (per resource) among the node's options it may grow into within limits.

        An option qualifies when its capacity of the first limited resource (cpu for the usual
        Provisioner) fits ``limits - usage - (reserved - self.reserved)``, the budget
        :meth:`within_limits` checks. Every option a placement could pick (narrowed, pinned or
        port-filtered) is one of ``self.options`` and must meet that budget, so a pod whose total
        does not fit this envelope cannot join the node: a necessary condition (exact with one
        limited resource, looser with several), never a wrong refusal. O(log options): the
        options sorted by that capacity with prefix maxima of allocatable are cached per list.
        """
        template = self.template
        assert template.limits is not None
        dim = template.first_limited
        if dim < 0:
            return self.max_allocatable
        headroom = template.limits[dim] - template.usage[dim] - template.reserved[dim] + self.reserved[dim]
        if self.max_capacity[dim] <= headroom:
            return self.max_allocatable  # every option is within the limits: nothing to cut
        options = self.options
        zero = template.dimensions.zero
        cached = memo.limit_envelopes.get((id(options), dim))
        if cached is None or cached[0] is not options:
            capacities, envelopes = [], []
            envelope = zero
            for t in sorted(options, key=lambda t: t.capacity[dim]):
                envelope = largest(envelope, t.allocatable)
                capacities.append(t.capacity[dim])
                envelopes.append(envelope)
            cached = (options, capacities, envelopes)
            memo.limit_envelopes[(id(options), dim)] = cached
        count = bisect_right(cached[1], headroom)
        return cached[2][count - 1] if count else zero


# --------------------------------------------------------------------------- topology domains of options
def domains_of(memo: Memo, options: list[TypeOption], requirements: Requirements, key: str) -> frozenset[str]:
    """The values of undecided ``key`` a node with ``options`` and ``requirements`` could take.

    A value only a too-small type offers is caught by the fit check after pinning.
    """
    memo_key = (id(options), requirements, key)
    cached = memo.domains.get(memo_key)
    if cached is None or cached[0] is not options:
        cached = (options, frozenset(v for t in options for v in option_domains(memo, t, requirements, key)))
        memo.domains[memo_key] = cached
    return cached[1]


def pin(memo: Memo, requirements: Requirements, options: list[TypeOption],
        pins: Mapping[str, str]) -> tuple[Requirements, list[TypeOption]]:
    """``requirements`` with topology keys pinned to one value each, and the options that still offer them."""
    key = (id(options), requirements, tuple(sorted(pins.items())))
    cached = memo.pinned.get(key)
    if cached is None or cached[0] is not options:
        pinned = requirements & Requirements(Requirement.of(k, IN, (v,)) for k, v in pins.items())
        cached = (options, pinned, [t for t in options if allows(memo, t, pinned)])
        memo.pinned[key] = cached
    return cached[1], cached[2]


# --------------------------------------------------------------------------- opening a node
def open_node(index: int, template: NodeTemplate, queued: QueuedPod, constraints: list[TopologyConstraint],
              alternative: Alternative, requirements: Requirements, options: list[TypeOption],
              topology: Topology, memo: Memo, run: int = 1,
              room_wanted: Callable[[QueuedPod, Vector], bool] | None = None) -> Candidate | str:
    """A new node of ``template`` for ``queued`` (the placement that opens it), or why not.

    ``requirements`` and ``options`` come from
    :func:`~provisioner.scheduling.solver.templates.options_for`; topology pins a domain and,
    under limits, options beyond what the Provisioner has left are dropped.

    ``run``: how many pods identical to ``queued`` (its shape and requests) are still to place,
    itself included. When a node for several of them costs less a pod than one alone, the node
    gets that price as its ``bulk_price`` (:func:`~provisioner.scheduling.solver.pricing.bulk_price`),
    unless ``room_wanted`` says another pod still to place fits in the room the pod leaves on
    the node it opens as: the marginal rule then fills that room with such pods at no extra
    price, so the pod costs less than a node of its own, while a node packed with the run
    leaves those pods less room. A pod with host ports (two never share a node) or one that a
    topology constraint concerns (its own spread, pod affinity or anti-affinity, or another
    pod's that counts it) has a run of one: such constraints spread a run over nodes or
    domains, each node would then get part of the run, and a node grown for the run but
    launched with a part of it can cost more than nodes of their own.
    """
    zero = template.dimensions.zero
    node = OpenNode(index=index, hostname=f"planned-node-{index}", template=template,
                    requirements=template.requirements, requested=zero, reserved=zero)
    node.set_options(options, memo)
    check = topology.check(queued.shape, constraints, node, lambda key: domains_of(memo, options, requirements, key))
    if check.reason is not None:
        return check.reason
    if check.pins:
        requirements, options = pin(memo, requirements, options, check.pins)
        if not options:
            return "no instance type offers the topology domain"
    node.requirements = requirements
    node.set_options(options, memo)
    fit = node.price_with(options, requirements, queued.requests, memo)
    reserved = None
    if template.limits is not None and fit is not None:
        if not node.within_limits(fit.cheapest.option.capacity):
            options = [t for t in options if node.within_limits(t.capacity)]
            fit = node.price_with(options, requirements, queued.requests, memo) if options else None
            if fit is None:
                return template.limits_reason()
            node.set_options(options, memo)
        reserved = fit.cheapest.option.capacity
    if fit is None:
        return "no instance type offers the topology domain"
    shape = queued.shape
    if run > 1 and not (queued.pod.host_ports or constraints or shape.selected_by or shape.anti_affinity_groups):
        target = bulk_price(memo, template, alternative.requirements, shape.accelerator, queued.requests, run)
        if target is not None and not (room_wanted is not None and room_wanted(
                queued, minus(fit.cheapest.option.allocatable, queued.requests))):
            node.bulk_shape, node.bulk_requests, node.bulk_price = shape, queued.requests, target
    return Candidate(fit.price, node, queued, queued.requests, requirements, options, reserved, fit)
