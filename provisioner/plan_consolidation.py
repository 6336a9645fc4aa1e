"""``groupless plan --consolidate``: what consolidation would do with the given Nodes and bound Pods, and what it saves.

From the same manifests as ``groupless plan`` (Nodes with their instance-type, zone and
capacity-type labels and, when known, the ``groupless.dev/price-per-hour`` annotation; Pods
bound to them with ``spec.nodeName``; Provisioners; DaemonSets; PodDisruptionBudgets, counted
over those pods), the
consolidation controller's own rules (:mod:`provisioner.state.consolidation`,
:mod:`provisioner.scheduling.consolidation`) are applied move after move, each move's
replacements taking the place of its nodes with the pods the plan put there, until no move
saves enough. A dry run has no history, so the settle period and the share of nodes disrupted
at once do not apply; every Provisioner is planned as if ``consolidation.enabled`` were true
(the printout says which were not). The price of a node without the annotation comes from the
catalog (its instance type, capacity type and zone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.api.types import Consolidation, Provisioner
from provisioner.model import labels as wk
from provisioner.model import objects
from provisioner.model.quantity import to_wire_resource_list
from provisioner.scheduling.consolidation import Move, decide
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.solver import PlannedNode
from provisioner.state.cluster import snapshot_of
from provisioner.state.consolidation import consolidation_input
from provisioner.state.nodes import NodeViews

#: Moves planned at most (each is one decision).
MAX_MOVES = 200


@dataclass(frozen=True)
class ConsolidationPlan:
    """The moves in order, the price (USD/hour) of the nodes before and after, and what was left alone.

    ``unconsolidatable``: node name -> why, for the nodes of the last decision that were not
    candidates. ``assumed_on``: Provisioners planned as if consolidation were on.
    """

    moves: tuple[Move, ...]
    nodes_before: int
    nodes_after: int
    price_before: float
    price_after: float
    unconsolidatable: Mapping[str, str]
    assumed_on: tuple[str, ...] = ()

    @property
    def savings(self) -> float:
        return self.price_before - self.price_after


def _price_of(catalog: Mapping[str, Sequence[InstanceType]]) -> Any:
    types = {it.name: it for group in catalog.values() for it in group}

    def lookup(instance_type: str, capacity_type: str, zone: str) -> float | None:
        it = types.get(instance_type)
        if it is None:
            return None
        prices = [o.price for o in it.offerings if o.capacity_type == capacity_type and (not zone or o.zone == zone)]
        return min(prices) if prices else None

    return lookup


def _node_manifest(name: str, planned: PlannedNode) -> dict[str, Any]:
    """The Node a replacement would become: the plan's labels and taints, its cheapest option's capacity and price."""
    it, offering = planned.instance_type, planned.offering
    labels = {**dict(it.labels), **dict(planned.labels), wk.INSTANCE_TYPE: it.name, wk.ZONE: offering.zone,
              wk.CAPACITY_TYPE: offering.capacity_type, wk.ARCH: it.arch, wk.OS: it.os, wk.HOSTNAME: name,
              wk.PROVISIONER_NAME: planned.provisioner}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"plan/node/{name}", "labels": labels,
                     "annotations": {wk.PRICE_ANNOTATION: str(planned.price)}},
        "spec": {"taints": [t.to_dict() for t in planned.taints]} if planned.taints else {},
        "status": {"capacity": to_wire_resource_list(it.capacity), "allocatable": to_wire_resource_list(it.allocatable),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _bound(pod: Mapping[str, Any], node: str) -> dict[str, Any]:
    copy = dict(pod)
    copy["spec"] = {**dict(pod.get("spec") or {}), "nodeName": node}
    copy["status"] = {**dict(pod.get("status") or {}), "phase": "Running",
                      "conditions": [{"type": "Ready", "status": "True"}]}
    return copy


def plan_consolidation(
    *,
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    provisioners: Sequence[Provisioner],
    catalog: Mapping[str, Sequence[InstanceType]],
    daemonsets: Sequence[dict[str, Any]] = (),
    pdbs: Sequence[dict[str, Any]] = (),
    now: float = 0.0,
    min_savings_fraction: float = 0.1,
    spot_options: int = 15,
) -> ConsolidationPlan:
    """Consolidation's moves over the manifests, applied one after another (see the module docstring)."""
    assumed = tuple(sorted(p.name for p in provisioners if not p.spec.consolidation_enabled))
    enabled = [dataclasses.replace(p, spec=dataclasses.replace(p.spec, consolidation=Consolidation(enabled=True)))
               for p in provisioners]
    current_nodes = [dict(n) for n in nodes]
    current_pods = [dict(p) for p in pods if (p.get("spec") or {}).get("nodeName")]  # bound pods only
    moves: list[Move] = []
    views_cache = NodeViews(price_of=_price_of(catalog))
    before: tuple[int, float] | None = None
    unconsolidatable: Mapping[str, str] = {}
    for step in range(MAX_MOVES + 1):
        snapshot = snapshot_of(nodes=current_nodes, pods=current_pods, provisioners=enabled, daemonsets=daemonsets,
                               taken_at=now)
        snapshot = dataclasses.replace(snapshot, pdbs=tuple(pdbs))
        views = views_cache.nodes(snapshot)
        managed = [v for v in views.values() if v.managed]
        if before is None:
            before = (len(managed), sum(v.price or 0.0 for v in managed))
        after = (len(managed), sum(v.price or 0.0 for v in managed))
        given = consolidation_input(snapshot, views, catalog, now=now, stable_since={n: now for n in views},
                                    settle_seconds=0.0)
        unconsolidatable = given.unconsolidatable
        if step == MAX_MOVES:
            break
        decision = decide(given.base, given.candidates, max_nodes=len(given.candidates),
                          min_savings_fraction=min_savings_fraction, spot_options=spot_options)
        move = decision.move
        if move is None:
            break
        moves.append(move)
        gone = set(move.nodes)
        placement: dict[str, str] = {p.key: e.node for e in move.existing for p in e.pods}
        plan_nodes = []
        for i, planned in enumerate(move.replacements):
            name = f"replacement-{len(moves)}-{i + 1}"
            plan_nodes.append(_node_manifest(name, planned))
            placement.update({p.key: name for p in planned.pods})
        current_nodes = [n for n in current_nodes if objects.name(n) not in gone] + plan_nodes
        moved = []
        for pod in current_pods:
            if str((pod.get("spec") or {}).get("nodeName") or "") not in gone:
                moved.append(pod)
            elif objects.key(pod) in placement:
                moved.append(_bound(pod, placement[objects.key(pod)]))
            # DaemonSet pods of a removed node go with it
        current_pods = moved
    assert before is not None
    return ConsolidationPlan(tuple(moves), before[0], after[0], before[1], after[1], unconsolidatable, assumed)


def to_table(result: ConsolidationPlan) -> str:
    """One line per move, then the nodes left alone and the totals."""
    lines = []
    for name in result.assumed_on:
        lines.append(f"Provisioner {name} has consolidation off: planned as if it were on")
    if not result.moves:
        lines.append("No consolidation move saves enough.")
    for i, move in enumerate(result.moves, 1):
        lines.append(f"{i}. {move.describe()}")
    for name, reason in sorted(result.unconsolidatable.items()):
        lines.append(f"Kept {name}: {reason}")
    lines.append(f"Total: {result.nodes_before} node(s) at ${result.price_before:.4f}/hour -> "
                 f"{result.nodes_after} node(s) at ${result.price_after:.4f}/hour, "
                 f"saves ${result.savings:.4f}/hour in {len(result.moves)} move(s)")
    return "\n".join(lines)


def to_json(result: ConsolidationPlan) -> dict[str, Any]:
    """The JSON form of docs/plan.md: ``{assumedOn, moves, kept, before, after, savingsPerHour}``."""
    return {
        "assumedOn": list(result.assumed_on),
        "moves": [
            {
                "kind": m.kind,
                "nodes": list(m.nodes),
                "pods": m.pods,
                "pricePerHour": round(m.price, 6),
                "replacements": [{"provisioner": n.provisioner, "instanceType": n.instance_type.name,
                                  "zone": n.offering.zone, "capacityType": n.offering.capacity_type,
                                  "pricePerHour": round(n.price, 6), "pods": [p.key for p in n.pods]}
                                 for n in m.replacements],
                "savingsPerHour": round(m.savings, 6),
            }
            for m in result.moves
        ],
        "kept": [{"node": n, "reason": r} for n, r in sorted(result.unconsolidatable.items())],
        "before": {"nodes": result.nodes_before, "pricePerHour": round(result.price_before, 6)},
        "after": {"nodes": result.nodes_after, "pricePerHour": round(result.price_after, 6)},
        "savingsPerHour": round(result.savings, 6),
    }
