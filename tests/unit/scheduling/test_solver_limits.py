"""Provisioner limits at the edge: what the solver's limit fast path must not change.

A planned node reserves its cheapest option's capacity against its Provisioner's limits. Once
the limit binds, a node may still take pods into its slack (no new capacity) and may grow into
a larger option only when that option's capacity fits ``limits - usage - reserved`` plus what
the node itself already reserves. The fast path (``OpenNode.limit_envelope``) refuses a pod
before topology and pricing when no option the node may grow into holds it: these tests pin
that it refuses nothing the full check would accept.
"""

from __future__ import annotations

import random

import pytest

from provisioner.model.quantity import parse_quantity
from provisioner.scheduling.solver import Plan, SolverInput, solve
from provisioner.scheduling.solver.planned import OpenNode
from tests.builders.catalog import instance_type, solver_catalog
from tests.builders.pods import pod
from tests.builders.provisioners import provisioner

LARGE = instance_type("c.large", "amd64", 2000, 4096, 29, 1930, 3500, 0.1)
XLARGE = instance_type("c.xlarge", "amd64", 4000, 8192, 58, 3820, 7200, 0.2)
XXLARGE = instance_type("c.2xlarge", "amd64", 8000, 16384, 58, 7810, 15000, 0.4)


def _run(pods, limits, types=(LARGE, XLARGE, XXLARGE)) -> Plan:
    prov = provisioner(limits=limits)
    return solve(SolverInput(pods=pods, provisioners=[prov], instance_types={"default": list(types)}))


def _layout(plan: Plan) -> list[tuple[str, list[str]]]:
    return [(n.instance_type.name, [p.name for p in n.pods]) for n in plan.new_nodes]


def test_at_the_limit_a_node_still_fills_its_slack_and_grows_within_its_own_reservation():
    # 3 + 3 vCPU: the first node grows from c.xlarge to c.2xlarge (8 vCPU = the whole limit, its
    # own 4 vCPU reservation counts as headroom); then a 1 vCPU pod fits its slack (7 of 7.81
    # allocatable) and the last one would need capacity beyond the limit.
    pods = [pod("a", cpu="3"), pod("b", cpu="3"), pod("c", cpu="1"), pod("d", cpu="1")]
    plan = _run(pods, {"cpu": "8"})
    assert _layout(plan) == [("c.2xlarge", ["a", "b", "c"])]
    assert [e.pod.name for e in plan.unschedulable] == ["d"]
    assert ("would exceed limits of provisioner default (cpu: 8 in use or planned of 8; "
            "the smallest instance type that fits the pod adds cpu: 2)") in plan.unschedulable[0].reason


def test_a_node_that_may_not_grow_keeps_taking_pods_that_fit_its_current_option():
    # limit 6: a c.xlarge (4) and a c.large (2) use it all; smaller pods still land in their slack
    pods = [pod("big", cpu="3"), pod("mid", cpu="1500m"), pod("s1", cpu="500m"), pod("s2", cpu="500m"),
            pod("t1", cpu="250m"), pod("u1", cpu="100m")]
    plan = _run(pods, {"cpu": "6"})
    assert _layout(plan) == [("c.xlarge", ["big", "s1", "t1"]), ("c.large", ["mid", "u1"])]
    assert [e.pod.name for e in plan.unschedulable] == ["s2"]


def _random_pods(rng: random.Random, n: int) -> list:
    pods = []
    for i in range(n):
        spec = {}
        if rng.random() < 0.3:
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": {"matchLabels": {"app": "w"}}}]
        pods.append(pod(f"p{i}", cpu=rng.choice(["100m", "250m", "500m", "1", "2", "3"]),
                        memory=rng.choice(["128Mi", "1Gi", "4Gi", "12Gi"]), labels={"app": "w"}, spec=spec))
    return pods


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limits", [{"cpu": "12"}, {"cpu": "20", "memory": "48Gi"}, {"memory": "40Gi"}])
def test_the_limit_fast_path_places_exactly_what_the_full_check_places(seed, limits, monkeypatch):
    rng = random.Random(seed)
    pods = _random_pods(rng, 60)
    types = solver_catalog()[:6]
    fast = _run(pods, limits, types)
    # the same solve with the fast path off: every planned node is priced and limit-checked in full
    monkeypatch.setattr(OpenNode, "limit_envelope", lambda self, memo: self.max_allocatable)
    full = _run(pods, limits, types)
    assert _layout(fast) == _layout(full)
    assert [(e.pod.name, e.reason) for e in fast.unschedulable] == [(e.pod.name, e.reason) for e in full.unschedulable]
    assert fast.unschedulable, "the limit must bind for this test to mean anything"
    # and the limit holds: reserved capacity (each node's cheapest option) within every limited resource
    for name, quantity in limits.items():
        limit = parse_quantity(quantity, name)
        assert sum(n.instance_type.capacity.get(name) for n in fast.new_nodes) <= limit
