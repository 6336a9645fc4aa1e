"""The solver's scan fast paths change its speed, never its plan.

``TOPOLOGY_FAST_PATH`` (``provisioner/scheduling/solver/solve.py``) passes over planned nodes
whose decided topology domain refuses the pod (``DecidedDomains``) and starts the scan past the
nodes with no room for the pod's requests (``Memo.full``). Each workload here is solved with
the fast paths on and off and the two plans must be the same: every node's options, offering,
price and pods in order, every placement on an existing node, every unschedulable pod with its
reason. The workloads mix every constraint the fast paths read (zone and hostname spread with
both ``whenUnsatisfiable`` values, ``maxSkew`` 1-2 and ``minDomains``, zone pod affinity,
hostname and zone anti-affinity, preferred terms, node selectors on zones), plain pods, existing
nodes with room, and Karpenter's scheduling benchmark workload.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

import pytest

from benchmarks.scheduling import diverse_pods, fake_instance_types
from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.model.resources import Resources
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import pod_from_manifest
from provisioner.scheduling.solver import Plan, SolverInput, solve
from provisioner.state.cluster import snapshot_of
from provisioner.state.solverinput import build_solver_input
from tests.builders.catalog import solver_catalog
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

solve_module = importlib.import_module("provisioner.scheduling.solver.solve")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
APPS = ("a", "b", "c")


def _spread(rng: random.Random, key: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": rng.choice([1, 1, 2]), "topologyKey": key,
        "whenUnsatisfiable": rng.choice(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"]),
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}}
    if key == HOSTNAME and rng.random() < 0.2:
        constraint.update(minDomains=rng.choice([2, 4]), whenUnsatisfiable="DoNotSchedule")
    return {"topologySpreadConstraints": [constraint]}


def _term(rng: random.Random, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": key}


def _random_manifests(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        kind = rng.choice(["plain", "zone-spread", "host-spread", "zone-affinity", "host-anti", "zone-anti",
                           "preferred", "zone-selector", "two-spreads"])
        spec: dict[str, Any] = {}
        if kind == "zone-spread":
            spec = _spread(rng, ZONE)
        elif kind == "host-spread":
            spec = _spread(rng, HOSTNAME)
        elif kind == "two-spreads":
            spec = {"topologySpreadConstraints": _spread(rng, ZONE)["topologySpreadConstraints"]
                    + _spread(rng, HOSTNAME)["topologySpreadConstraints"]}
        elif kind == "zone-affinity":
            spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, ZONE)]}}}
        elif kind == "host-anti":
            spec = {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, HOSTNAME)]}}}
        elif kind == "zone-anti":
            spec = {"affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, ZONE)]}}}
        elif kind == "preferred":
            spec = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": _term(rng, HOSTNAME)}]}}}
        elif kind == "zone-selector":
            spec = {"nodeSelector": {ZONE: rng.choice(["ap-south-1a", "ap-south-1b"])}}
        out.append(manifest(f"p{i}", cpu=rng.choice(["100m", "250m", "500m", "1", "2"]),
                            memory=rng.choice(["128Mi", "512Mi", "1Gi", "4Gi"]),
                            labels={"app": rng.choice(APPS)}, spec=spec))
    return out


def _existing(rng: random.Random, count: int) -> list[ClusterNode]:
    nodes = []
    for i in range(count):
        zone = ("ap-south-1a", "ap-south-1b", "ap-south-1c")[i % 3]
        running = pod_from_manifest(manifest(f"running-{i}", cpu="500m", memory="512Mi",
                                             labels={"app": rng.choice(APPS)}, spec={"nodeName": f"existing-{i}"}))
        nodes.append(ClusterNode(
            name=f"existing-{i}",
            labels={ZONE: zone, HOSTNAME: f"existing-{i}", "kubernetes.io/arch": "amd64",
                    "kubernetes.io/os": "linux", "karpenter.sh/provisioner-name": "default"},
            allocatable=Resources({"cpu": rng.choice([2000, 4000]), "memory": 8 * 2**30, "pods": 29}),
            requested=running.requests, provisioner="default", pods=(running,)))
    return nodes


def _layout(plan: Plan) -> tuple[Any, ...]:
    return (
        [(n.provisioner, [t.name for t in n.instance_type_options], n.offering, round(n.price, 9),
          [p.key for p in n.pods]) for n in plan.new_nodes],
        [(e.node, [p.key for p in e.pods]) for e in plan.existing],
        [(e.pod.key, e.reason) for e in plan.unschedulable],
    )


def _both(given: SolverInput, monkeypatch: pytest.MonkeyPatch) -> tuple[Plan, Plan]:
    fast = solve(given)
    monkeypatch.setattr(solve_module, "TOPOLOGY_FAST_PATH", False)
    full = solve(given)
    monkeypatch.setattr(solve_module, "TOPOLOGY_FAST_PATH", True)
    return fast, full


@pytest.mark.parametrize("seed", range(12))
def test_random_workloads_plan_the_same_with_and_without_the_fast_paths(seed, monkeypatch):
    rng = random.Random(seed)
    pods = [pod_from_manifest(m) for m in _random_manifests(rng, rng.choice([60, 150, 300]))]
    nodes = _existing(rng, rng.choice([0, 0, 3, 8]))
    limits = rng.choice([None, None, {"cpu": "60"}])
    given = SolverInput(pods=pods, provisioners=[provisioner(limits=limits)],
                        instance_types={"default": solver_catalog()}, nodes=nodes)
    fast, full = _both(given, monkeypatch)
    assert _layout(fast) == _layout(full)
    assert fast.new_nodes, "the workload must plan nodes for the comparison to mean anything"


@pytest.mark.parametrize("pods", [500, 1500])
def test_karpenters_benchmark_workload_plans_the_same_with_and_without_the_fast_paths(pods, monkeypatch):
    manifests = diverse_pods(pods, random.Random(42))
    snapshot = snapshot_of(pods=manifests, provisioners=[Provisioner(name="default", spec=ProvisionerSpec())])
    given = build_solver_input(snapshot, {}, manifests, {"default": fake_instance_types()}, now=0.0).input
    fast, full = _both(given, monkeypatch)
    assert _layout(fast) == _layout(full)
    assert len(fast.new_nodes) == pods // 5  # the hostname anti-affinity group needs a node per pod
