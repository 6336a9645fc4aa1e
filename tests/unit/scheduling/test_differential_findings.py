"""Disagreements the differential test found between the plan and the real kube-scheduler, with the right answers.

Each case is the smallest plan that shows one (``localcluster/differential/``: seeded workloads
planned by the production builder and solver, launched on kwok, bound by kube-scheduler). Every
case goes through Node and Pod manifests, the shared node views and the one solver-input builder.

Units: cpu quantities as in manifests; m5.xlarge allocatable 3820m.
"""

from __future__ import annotations

from typing import Any

from provisioner.model.labels import ZONE
from tests.builders.nodes import node_manifest
from tests.builders.plans import bound, on_existing, plan_of
from tests.builders.pods import manifest
from tests.unit.scheduling.test_existing_preferences import HOSTNAME, PROVISIONER, TYPES, A, B


def node(name: str, zone: str = A, cpu: str = "1500m") -> dict[str, Any]:
    """A Ready node of the default Provisioner in ``zone`` with ``cpu`` allocatable."""
    return node_manifest(name, provisioner="default", labels={ZONE: zone, HOSTNAME: name},
                         allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110"})


def with_db_in_zone(name: str, cpu: str = "1") -> dict[str, Any]:
    """A pod that must run in a zone where an ``app: db`` pod runs (required pod affinity on the zone)."""
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}
    return manifest(name, cpu=cpu, labels={"app": "api"},
                    spec={"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})


def db(name: str, zone: str = A, cpu: str = "2") -> dict[str, Any]:
    return manifest(name, cpu=cpu, labels={"app": "db"}, spec={"nodeSelector": {ZONE: zone}})


def placed(plan: Any) -> list[tuple[str, list[str]]]:
    """(zone, pod names) of each new node."""
    return [(n.labels.get(ZONE, n.offering.zone), sorted(p.name for p in n.pods)) for n in plan.new_nodes]


# ----------------------------------------------------------------------------- required pod affinity
def test_pod_affinity_to_pods_planned_for_new_nodes_does_not_take_existing_room() -> None:
    # The db pod is too big for n1 and gets a new node in 1a. The api pod must be in a zone with a
    # db pod: kube-scheduler refuses n1 (1a) now, as no db pod runs anywhere yet; it binds the api
    # pod only once the db pod is bound on its new node. Planning the api pod on n1 left it
    # Pending while the room the plan counted on there went to other pods (seed 1000).
    plan = plan_of([db("db-0"), with_db_in_zone("api-0")], [PROVISIONER], TYPES, nodes=[node("n1")])
    assert on_existing(plan) == {}
    assert placed(plan) == [(A, ["api-0", "db-0"])]
    assert plan.unschedulable == ()


def test_pod_affinity_to_pods_running_on_existing_nodes_still_takes_existing_room() -> None:
    # a db pod runs on n2 in 1a: kube-scheduler binds the api pod to n1 (1a) at once
    plan = plan_of([with_db_in_zone("api-0")], [PROVISIONER], TYPES, nodes=[node("n1"), node("n2", cpu="500m")],
                   running=[bound("db-0", "n2", cpu="500m", labels={"app": "db"})])
    assert on_existing(plan) == {"n1": ["api-0"]}
    assert plan.new_nodes == ()


def test_pod_affinity_follows_pods_the_plan_puts_on_existing_nodes() -> None:
    # the db pod fits n1 and is bound there at once; the api pod, queued after it, may then take n2
    plan = plan_of([db("db-0", cpu="1"), with_db_in_zone("api-0", cpu="1")], [PROVISIONER], TYPES,
                   nodes=[node("n1", cpu="1"), node("n2", cpu="1")])
    assert on_existing(plan) == {"n1": ["db-0"], "n2": ["api-0"]}
    assert plan.new_nodes == ()


def test_a_pod_whose_affinity_is_to_itself_starts_a_domain_on_an_existing_node() -> None:
    # no pod of the group runs anywhere: the first one may go anywhere, the rest follow its zone
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "cache"}}}
    pods = [manifest(f"c{i}", cpu="1", labels={"app": "cache"},
                     spec={"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})
            for i in range(2)]
    plan = plan_of(pods, [PROVISIONER], TYPES, nodes=[node("n1", B)])
    assert on_existing(plan) == {"n1": ["c0"]}
    assert placed(plan) == [(B, ["c1"])]
