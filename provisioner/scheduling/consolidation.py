"""Consolidation decisions: which nodes to remove or replace, and what that saves (pure).

Karpenter v0.15-v0.31 consolidation only deletes a node or replaces one node (single-node),
or a prefix of its candidates with at most one new node (multi-node), so it often cannot act on
nodes that are obviously underused (aws#9207, k-sigs#1442). Here any set of candidates is
repacked by the whole-plan solver (:func:`provisioner.scheduling.solver.solve`): their pods are
solved as if pending over the rest of the cluster (the candidates left out, their capacity taken
off their Provisioners' limits usage), and the plan's new nodes, as many as it takes, are the
replacements.

A **move** (:class:`Move`) is a set of candidates and its plan: **delete** when every pod fits
on the remaining nodes, **replace** when the plan launches nodes that cost less. Among the sets
tried (:func:`decide`), the one with the highest savings per disrupted pod wins (an empty node
counts as one pod, so empty nodes go first). The sets tried, cheapest to simulate first: all
empty candidates together; each candidate alone; then growing prefixes (2, 3, 4, 6, 8, 12, ...)
of the candidates ordered by how full they are (least full first, then fewer pods, then the
higher price), up to ``max_nodes``.

Churn guards (Karpenter's own and the issues its users reported, aws#7146, k-sigs#1293):

* a move must save at least ``min_savings_fraction`` of the candidates' price (USD/hour);
* at most ``max_nodes`` nodes disrupted by one move (the caller derives it from the share of
  nodes it allows to be disrupted at once);
* a spot candidate is replaced only by spot capacity that stays cheaper across at least
  ``spot_options`` instance types (Karpenter's 15: a replacement launched among fewer options
  lands, by the spot allocation strategy, on a type that soon looks replaceable again); a set
  holding a spot candidate that falls short is only ever deleted, and a replacement that passes
  is launched among those cheapest options only, pinned to spot (:func:`pin_spot`).

Candidates themselves (who may be disrupted now, the settle period, re-validation before acting)
are decided by :mod:`provisioner.state.consolidation` and the controller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.model import labels as wk
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.model.resources import CPU, EMPTY, MEMORY, Resources
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.solver import ExistingPlacement, Plan, PlannedNode, SolverInput, solve

#: Single-candidate moves simulated per decision at most (each is one solve).
MAX_SINGLE_MOVES = 32
DELETE = "delete"
REPLACE = "replace"
#: A price difference below this many USD/hour counts as none.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Candidate:
    """A node that may be consolidated.

    ``price``: USD/hour. ``capacity``: what it counts against its Provisioner's limits (core
    units). ``pods``: the pods that must run elsewhere if it goes (bound pods that are not
    DaemonSet, static or finished), as the solver reads them. ``utilization``: the larger of its
    cpu and memory requests over allocatable (0..1; orders the multi-node prefixes).
    """

    name: str
    provisioner: str
    price: float
    capacity_type: str
    instance_type: str
    capacity: Resources = EMPTY
    pods: tuple[Pod, ...] = ()
    utilization: float = 0.0

    @property
    def spot(self) -> bool:
        return self.capacity_type == wk.CAPACITY_TYPE_SPOT


@dataclass(frozen=True)
class Move:
    """A consolidation action: remove ``nodes`` (names, sorted) and launch ``replacements``.

    ``price``: the candidates' USD/hour; ``savings``: ``price`` minus the replacements' price.
    ``pods``: how many pods it disrupts. ``kind``: :data:`DELETE` or :data:`REPLACE`.
    ``existing``: the pods the plan puts on existing nodes.
    """

    nodes: tuple[str, ...]
    price: float
    pods: int
    replacements: tuple[PlannedNode, ...] = ()
    existing: tuple[ExistingPlacement, ...] = ()

    @property
    def kind(self) -> str:
        return REPLACE if self.replacements else DELETE

    @property
    def replacement_price(self) -> float:
        return sum(n.price for n in self.replacements)

    @property
    def savings(self) -> float:
        """USD/hour saved."""
        return self.price - self.replacement_price

    @property
    def savings_per_pod(self) -> float:
        """USD/hour saved per disrupted pod (an empty node counts as one)."""
        return self.savings / max(1, self.pods)

    def describe(self) -> str:
        """One line for logs and events: what goes, what comes, what it saves."""
        what = f"delete {len(self.nodes)} node(s) ({', '.join(self.nodes)})"
        if self.replacements:
            types = ", ".join(n.instance_type.name + "/" + n.offering.capacity_type for n in self.replacements)
            what = (f"replace {len(self.nodes)} node(s) ({', '.join(self.nodes)}) with "
                    f"{len(self.replacements)} ({types})")
        return (f"{what}: {self.pods} pod(s) move, {self.price:.4f} -> {self.replacement_price:.4f} USD/hour, "
                f"saves {self.savings:.4f} USD/hour")


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` found: the best move (None when none passes) and why each set tried failed.

    ``refused``: candidate names (sorted, joined by ``,``) -> reason, for the sets tried.
    ``solves``: how many plans were simulated.
    """

    move: Move | None
    refused: dict[str, str] = field(default_factory=dict)
    solves: int = 0


def pending_copy(pod: Pod) -> Pod:
    """``pod`` as the solver plans it when its node goes: unbound, not nominated, pending."""
    return replace(pod, node_name=None, nominated_node_name=None, phase="Pending", deleting=False)


def utilization(requested: Resources, allocatable: Resources) -> float:
    """The larger of the cpu and memory shares of ``allocatable`` that ``requested`` takes (0 when none)."""
    shares = [requested.get(name) / allocatable.get(name) for name in (CPU, MEMORY) if allocatable.get(name) > 0]
    return max(shares, default=0.0)


def order(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Least full first, then fewer pods, then the higher price, then by name."""
    return sorted(candidates, key=lambda c: (round(c.utilization, 6), len(c.pods), -c.price, c.name))


def simulate(base: SolverInput, chosen: Sequence[Candidate], solver: Callable[[SolverInput], Plan] = solve) -> Plan:
    """The plan for ``chosen``'s pods over ``base`` without the chosen nodes (their capacity off their limits usage).

    ``base``: the cluster's solver input with no pods (every node, the Provisioners, their
    instance types, the DaemonSets, limits usage).
    """
    names = {c.name for c in chosen}
    usage = dict(base.provisioner_usage)
    for c in chosen:
        if c.provisioner in usage:
            usage[c.provisioner] = usage[c.provisioner] - c.capacity
    given = replace(
        base,
        pods=[pending_copy(p) for c in chosen for p in c.pods],
        nodes=[n for n in base.nodes if n.name not in names],
        provisioner_usage=usage,
    )
    return solver(given)


def _spot_price(it: Any, requirements: Requirements) -> float | None:
    prices = [o.price for o in it.available_offerings(requirements) if o.capacity_type == wk.CAPACITY_TYPE_SPOT]
    return min(prices) if prices else None


def pin_spot(plan: Plan, budget: float, spot_options: int) -> Plan:
    """``plan`` with each new spot node launched only among its ``spot_options`` cheapest spot options within budget.

    ``budget``: the USD/hour all of the plan's new nodes may cost together. A spot node keeps the
    options whose cheapest allowed spot offering keeps the total within it (the others' prices
    as planned), at most ``spot_options`` of them, cheapest first, and its capacity type is
    pinned to spot, so the launch cannot fall back to pricier capacity: Karpenter launches a
    spot-to-spot replacement with the 15 cheapest types. Nodes that are not spot are unchanged.
    """
    total = plan.total_price
    nodes = []
    for node in plan.new_nodes:
        if node.offering.capacity_type != wk.CAPACITY_TYPE_SPOT:
            nodes.append(node)
            continue
        limit = budget - (total - node.price)
        kept = [it for it in node.instance_type_options
                if (price := _spot_price(it, node.requirements)) is not None and price <= limit + _EPSILON]
        kept = kept[:spot_options] or list(node.instance_type_options[:1])
        requirements = node.requirements & Requirements((
            Requirement.of(wk.INSTANCE_TYPE, IN, [it.name for it in kept]),
            Requirement.of(wk.CAPACITY_TYPE, IN, [wk.CAPACITY_TYPE_SPOT]),
        ))
        nodes.append(replace(node, instance_type_options=tuple(kept), requirements=requirements))
    return replace(plan, new_nodes=tuple(nodes))


def spot_shortfall(move: Move, chosen: Sequence[Candidate], min_savings_fraction: float, spot_options: int) -> str | None:
    """Why a move replacing spot capacity breaks the spot rule; None when it keeps it (see the module docstring).

    Each replacement must be spot and have at least ``spot_options`` instance type options whose
    cheapest allowed spot offering keeps the move within the savings it must make.
    """
    if not move.replacements or not any(c.spot for c in chosen):
        return None
    limit = move.price * (1 - min_savings_fraction)
    total = move.replacement_price
    for node in move.replacements:
        if node.offering.capacity_type != wk.CAPACITY_TYPE_SPOT:
            return f"spot node(s) are only replaced by spot, not {node.offering.capacity_type}: delete only"
        budget = limit - (total - node.price)
        cheaper = 0
        for it in node.instance_type_options:
            price = _spot_price(it, node.requirements)
            if price is not None and price <= budget + _EPSILON:
                cheaper += 1
        if cheaper < spot_options:
            return (f"spot-to-spot replacement needs {spot_options} cheaper instance types, "
                    f"found {cheaper}: spot nodes are only deleted")
    return None


def evaluate(base: SolverInput, chosen: Sequence[Candidate], *, min_savings_fraction: float, spot_options: int,
             solver: Callable[[SolverInput], Plan] = solve) -> Move | str:
    """The move that removes ``chosen``, or why there is none (a pod fits nowhere, too little saved, the spot rule)."""
    plan = simulate(base, chosen, solver)
    if plan.unschedulable:
        first = plan.unschedulable[0]
        return f"{len(plan.unschedulable)} pod(s) would not fit elsewhere, e.g. {first.pod.key}: {first.reason}"
    move = Move(
        nodes=tuple(sorted(c.name for c in chosen)),
        price=sum(c.price for c in chosen),
        pods=sum(len(c.pods) for c in chosen),
        replacements=plan.new_nodes,
        existing=plan.existing,
    )
    if move.savings < min_savings_fraction * move.price - _EPSILON or move.savings <= _EPSILON:
        return (f"saves {move.savings:.4f} of {move.price:.4f} USD/hour, "
                f"less than the minimum share {min_savings_fraction:g}")
    spot = spot_shortfall(move, chosen, min_savings_fraction, spot_options)
    if spot is not None:
        return spot
    return move


def prefix_sizes(count: int, limit: int) -> list[int]:
    """Prefix lengths for multi-node moves: 2, 3, 4, 6, 8, 12, 16, ... up to ``min(count, limit)`` (always tried)."""
    top = min(count, limit)
    sizes: list[int] = []
    power = 2
    while power <= top:
        for size in (power, power + power // 2):
            if 2 <= size <= top and size not in sizes:
                sizes.append(size)
        power *= 2
    if top >= 2 and top not in sizes:
        sizes.append(top)
    return sorted(sizes)


def decide(base: SolverInput, candidates: Sequence[Candidate], *, max_nodes: int, min_savings_fraction: float,
           spot_options: int, solver: Callable[[SolverInput], Plan] = solve) -> Decision:
    """The best move over ``candidates`` (see the module docstring), or why none is made.

    ``max_nodes``: the most nodes one move may disrupt (0: none). Moves are compared by savings
    per disrupted pod, then by savings, then by fewer nodes.
    """
    refused: dict[str, str] = {}
    if max_nodes <= 0 or not candidates:
        return Decision(None, refused, 0)
    ordered = order(candidates)
    tried: list[tuple[Candidate, ...]] = []
    empty = tuple(c for c in ordered if not c.pods)[:max_nodes]
    if empty:
        tried.append(empty)
    tried.extend((c,) for c in ordered[:MAX_SINGLE_MOVES] if c.pods)
    for size in prefix_sizes(len(ordered), max_nodes):
        prefix = tuple(ordered[:size])
        if prefix != empty:
            tried.append(prefix)
    best: Move | None = None
    solves = 0
    seen: set[tuple[str, ...]] = set()
    for chosen in tried:
        names = tuple(sorted(c.name for c in chosen))
        if names in seen:
            continue
        seen.add(names)
        solves += 1
        outcome = evaluate(base, chosen, min_savings_fraction=min_savings_fraction, spot_options=spot_options,
                           solver=solver)
        if isinstance(outcome, str):
            refused[",".join(names)] = outcome
            continue
        if best is None or _better(outcome, best):
            best = outcome
    return Decision(best, refused, solves)


def _better(move: Move, than: Move) -> bool:
    a = (round(move.savings_per_pod, 9), round(move.savings, 9), -len(move.nodes))
    b = (round(than.savings_per_pod, 9), round(than.savings, 9), -len(than.nodes))
    return a > b


def max_disrupted(total_nodes: int, share: float, disrupted_now: int) -> int:
    """Nodes a new move may disrupt: ``share`` of ``total_nodes`` (at least one) minus those disrupted now."""
    allowed = max(1, math.floor(total_nodes * share + _EPSILON)) if total_nodes > 0 else 0
    return max(0, allowed - disrupted_now)
