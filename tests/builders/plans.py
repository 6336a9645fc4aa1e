"""Plans from manifests, through the production wiring: snapshot, node views, the solver-input builder, the solver."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from provisioner.api.types import Provisioner
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.solver import Plan, solve
from provisioner.state.cluster import snapshot_of
from provisioner.state.nodes import NodeViews
from provisioner.state.solverinput import build_solver_input
from tests.builders.pods import manifest

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def bound(name: str, node: str, cpu: str = "500m", labels: dict[str, str] | None = None,
          **spec: Any) -> dict[str, Any]:
    """A Running pod bound to ``node``."""
    return manifest(name, cpu=cpu, labels=labels or {}, spec={"nodeName": node, **spec}, status={"phase": "Running"})


def plan_of(pending: Sequence[dict[str, Any]], provisioners: Sequence[Provisioner],
            instance_types: Mapping[str, Sequence[InstanceType]], *, nodes: Sequence[dict[str, Any]] = (),
            running: Sequence[dict[str, Any]] = (), daemonsets: Sequence[dict[str, Any]] = (),
            node_labels: Mapping[str, str] | None = None) -> Plan:
    """The plan for the ``pending`` pod manifests, over Node manifests ``nodes`` and the pods ``running`` on them.

    ``node_labels``: the controller's settings' labels for every node it launches.
    """
    snapshot = snapshot_of(nodes=nodes, pods=[*running, *pending], provisioners=provisioners, daemonsets=daemonsets)
    built = build_solver_input(snapshot, NodeViews().nodes(snapshot), pending, instance_types, now=NOW,
                               node_labels=node_labels or {})
    assert built.refused == ()
    return solve(built.input)


def on_existing(plan: Plan) -> dict[str, list[str]]:
    """Pod names per existing node the plan places pods on."""
    return {e.node: sorted(p.name for p in e.pods) for e in plan.existing}
