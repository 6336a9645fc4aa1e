"""The differential test's pure parts: the seeded workload generator, the agreement rule, the plan's expectations.

The cluster part runs in ``tests/e2e/test_12_differential.py``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster, Settings
from localcluster.differential.agreement import Expected, NodeFacts, Observed, alike, judge
from localcluster.differential.driver import expectations, queue_order, twins_key
from localcluster.differential.planning import plan_objects
from localcluster.differential.workload import CONSTRAINTS, REQUEST_STYLES, generate
from provisioner.scheduling.pods import pod_from_manifest

ZONE = "topology.kubernetes.io/zone"
TYPE = "node.kubernetes.io/instance-type"
HOST = "kubernetes.io/hostname"


# ------------------------------------------------------------------ the generator
def test_a_seed_gives_the_same_workload_every_time_and_another_seed_another() -> None:
    assert generate(7, 50) == generate(7, 50)
    assert generate(7, 50).pods != generate(8, 50).pods


def test_a_workload_has_the_pods_asked_for_with_unique_names_in_its_own_namespace() -> None:
    workload = generate(3, 100)
    names = [p["metadata"]["name"] for p in workload.pods]
    assert len(names) == 100 == len(set(names))
    assert {p["metadata"]["namespace"] for p in workload.pods} == {"diff-3"}
    cluster_scoped = [o for o in workload.setup if o["kind"] in ("Provisioner", "PersistentVolume", "RuntimeClass")]
    assert cluster_scoped and all(o["metadata"]["name"].startswith("diff-3-") for o in cluster_scoped)
    assert workload.general_provisioner == "diff-3-general"


def test_fifty_seeds_draw_every_request_style_and_constraint_and_the_parts_around_them() -> None:
    drawn: Counter[str] = Counter()
    for seed in range(50):
        drawn.update(generate(seed, 50).features)
    assert {f"style:{s}" for s in REQUEST_STYLES} <= set(drawn)
    assert {f"constraint:{c}" for c in CONSTRAINTS} <= set(drawn)
    for part in ("limit-range", "daemonset", "dedicated-provisioner", "existing-node", "filler-counted",
                 "no-requests:limits-only", "no-requests:nothing"):
        assert drawn[part] > 0, part


def test_fillers_are_bound_to_the_workloads_existing_nodes() -> None:
    workload = next(w for w in (generate(s, 50) for s in range(20)) if w.fillers)
    keys = {n.key for n in workload.existing}
    assert {p["spec"]["nodeName"] for p in workload.fillers} <= keys


def test_sizes_below_one_pod_are_refused() -> None:
    with pytest.raises(ValueError, match="pods: at least 1, got 0"):
        generate(1, 0)


@pytest.mark.parametrize("seed", range(6))
def test_the_production_planner_places_every_pod_of_a_generated_workload(seed: int) -> None:
    workload = generate(seed, 50)
    planned = plan_objects([*(o for o in workload.setup if o["kind"] not in ("Namespace", "RuntimeClass")),
                            *workload.pods])
    assert planned.plan.unschedulable == ()
    placed = sorted(p.key for n in planned.plan.new_nodes for p in n.pods)
    assert placed == sorted(f"diff-{seed}/{p['metadata']['name']}" for p in workload.pods)
    assert set(planned.provisioners) == {p["metadata"]["name"] for p in workload.provisioners}


# ------------------------------------------------------------------ queue order and expectations
def _pod(name: str, cpu: str, memory: str, init_cpu: str | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_pods_are_created_in_the_solvers_queue_order_by_the_requests_it_read() -> None:
    pods = [_pod("small", "100m", "1Gi"), _pod("init", "100m", "64Mi", init_cpu="2"), _pod("b", "1", "2Gi"),
            _pod("a", "1", "2Gi"), _pod("more-memory", "1", "4Gi")]
    read = [pod_from_manifest(p) for p in pods]
    assert [p["metadata"]["name"] for p in queue_order(pods, read)] == ["init", "more-memory", "a", "b", "small"]


def test_a_pod_without_requests_is_queued_with_the_limitrange_defaults_the_solver_gave_it() -> None:
    # seed 3005: a container without requests in a namespace whose LimitRange defaults limits to
    # 400m (requests default to the limits); created last by its manifest's zero requests, it
    # met existing room other pods had taken, and the plan had counted it there
    limit_range = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "ns"},
                   "spec": {"limits": [{"type": "Container", "default": {"cpu": "400m", "memory": "384Mi"}}]}}
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}
    pods = [_pod("small", "100m", "1Gi"), bare, _pod("big", "1", "1Gi")]
    provisioner = generate(1, 1).provisioners[0]
    planned = plan_objects([provisioner, limit_range, *pods])
    assert {p.name: p.requests.get("cpu") for p in planned.pods} == {"small": 100, "bare": 400, "big": 1000}
    assert [p["metadata"]["name"] for p in queue_order(pods, planned.pods)] == ["big", "bare", "small"]


def test_expectations_name_each_pods_planned_node_or_the_plans_reason() -> None:
    workload = generate(4, 20)
    planned = plan_objects([*(o for o in workload.setup if o["kind"] not in ("Namespace", "RuntimeClass")),
                            *workload.pods])
    expected = expectations(workload, planned)
    assert [e.pod for e in expected] == [f"diff-4/{p['metadata']['name']}" for p in workload.pods]
    for index, node in enumerate(planned.plan.new_nodes):
        assert {e.pod for e in expected if e.node == f"new:{index}"} == {p.key for p in node.pods}


def test_twins_are_the_pods_alike_but_for_their_names() -> None:
    workload = generate(4, 50)
    keys = [twins_key(p) for p in workload.pods]
    first, second = workload.pods[0], workload.pods[1]
    assert first["metadata"]["labels"] == second["metadata"]["labels"]  # replicas of one group
    assert keys[0] == keys[1]
    groups = {p["metadata"]["labels"]["app"] for p in workload.pods}
    assert len(set(keys)) >= len(groups)  # a group's pods with their own claims are no twins


# ------------------------------------------------------------------ the agreement rule
def _node(name: str, zone: str = "a", instance_type: str = "m5.large", planned: bool = True,
          cpu: str = "1930m") -> NodeFacts:
    return NodeFacts(name, {HOST: name, ZONE: zone, TYPE: instance_type, "groupless.dev/node-request": f"nr-{name}"},
                     frozenset({("dedicated", "batch", "NoSchedule")}), {"cpu": cpu, "memory": "7Gi"}, planned)


NODES = [_node("n1"), _node("n2"), _node("n3", zone="b"), _node("n4", cpu="3920m"), _node("e1", planned=False),
         _node("e2", zone="b", planned=False)]


def _verdict(planned: str | None, bound: str | None, message: str = "", reason: str = "") -> tuple[bool, str]:
    agreement = judge([Expected("ns/p", planned, reason)], [Observed("ns/p", bound, message)], NODES)
    (verdict,) = agreement.verdicts
    return verdict.agrees, verdict.cause


def _kinds(expected: list[Expected], observed: list[Observed]) -> list[tuple[str, bool, str]]:
    return [(v.pod, v.agrees, v.kind) for v in judge(expected, observed, NODES).verdicts]


def test_a_pod_bound_to_its_planned_node_agrees() -> None:
    assert _verdict("n1", "n1") == (True, "bound to its planned node n1 (m5.large, a)")


def test_a_pod_bound_to_a_node_like_its_planned_one_agrees() -> None:
    assert alike(NODES[0], NODES[1])
    assert _verdict("n1", "n2") == (True, "bound to n2 (m5.large, a), a node like its planned n1 (m5.large, a)")


def test_a_pod_bound_to_a_node_in_another_zone_disagrees_naming_the_label() -> None:
    assert _verdict("n1", "n3") == (False, "planned on n1 (m5.large, a), bound to n3 (m5.large, b): "
                                           "labels topology.kubernetes.io/zone=a/b")


def test_a_pod_bound_to_a_node_of_other_allocatable_disagrees() -> None:
    agrees, cause = _verdict("n1", "n4")
    assert not agrees
    assert cause.endswith("allocatable {'cpu': '1930m', 'memory': '7Gi'}/{'cpu': '3920m', 'memory': '7Gi'}")


def test_a_pod_the_plan_launched_for_that_kube_scheduler_bound_to_an_existing_node_disagrees() -> None:
    assert _verdict("n1", "e1") == (False, "the plan launched n1 (m5.large, a) for it, but kube-scheduler bound it "
                                           "to the existing node e1 (m5.large, a, existing)")


def test_a_pod_planned_on_an_existing_node_bound_to_a_new_one_disagrees() -> None:
    assert _verdict("e1", "n1") == (False, "planned on the existing node e1 (m5.large, a, existing), but "
                                           "kube-scheduler bound it to the new node n1 (m5.large, a)")


def test_a_pod_planned_on_existing_room_agrees_on_any_existing_node_as_the_plan_launches_nothing_for_it() -> None:
    assert _verdict("e1", "e1") == (True, "bound to its planned node e1 (m5.large, a, existing)")
    assert _verdict("e1", "e2") == (True, "planned on the existing node e1 (m5.large, a, existing), bound to the "
                                          "existing node e2 (m5.large, b, existing)")


def test_twins_bound_to_each_others_planned_nodes_agree() -> None:
    expected = [Expected("ns/a", "n1", twins="web"), Expected("ns/b", "n3", twins="web"),
                Expected("ns/c", "n4", twins="web")]
    observed = [Observed("ns/a", "n3"), Observed("ns/b", "n4"), Observed("ns/c", "n2")]
    assert _kinds(expected, observed) == [("ns/a", True, "twin-node"), ("ns/b", True, "twin-node"),
                                          ("ns/c", True, "twin-node")]
    cause = judge(expected, observed, NODES).verdicts[0].cause
    assert cause == "bound to n3 (m5.large, b), where the plan put its twin ns/b"


def test_twins_agree_only_as_far_as_the_planned_nodes_go_and_other_pods_are_no_twins() -> None:
    expected = [Expected("ns/a", "n1", twins="web"), Expected("ns/b", "n1", twins="web"),
                Expected("ns/c", "n3", twins="db")]
    # both twins planned in zone a; one went to zone b, where only a pod of another kind was planned
    observed = [Observed("ns/a", "n3"), Observed("ns/b", "n1"), Observed("ns/c", "n1")]
    assert _kinds(expected, observed) == [("ns/a", False, "other-node"), ("ns/b", True, "same-node"),
                                          ("ns/c", False, "other-node")]


def test_a_pod_left_pending_beside_its_planned_node_disagrees_with_kube_schedulers_message() -> None:
    message = "0/6 nodes are available: 6 node(s) didn't match pod topology spread constraints."
    assert _verdict("n1", None, message) == (False, f"planned on n1 (m5.large, a), left Pending: {message}")


def test_a_pod_without_a_place_agrees_when_pending_and_disagrees_when_bound() -> None:
    assert _verdict(None, None, reason="no instance type fits") == (
        True, "no place in the plan (no instance type fits) and left Pending")
    assert _verdict(None, "n1", reason="no instance type fits") == (
        False, "no place in the plan (no instance type fits), but kube-scheduler bound it to n1 (m5.large, a)")


def test_the_rate_counts_every_expected_pod_and_a_missing_observation_is_pending() -> None:
    agreement = judge([Expected("ns/a", "n1"), Expected("ns/b", "n2"), Expected("ns/c", "n3"), Expected("ns/d", "n1")],
                      [Observed("ns/a", "n1"), Observed("ns/b", "n1"), Observed("ns/c", "n1")], NODES)
    assert (agreement.agreed, agreement.total, agreement.rate) == (2, 4, 0.5)
    assert [v.pod for v in agreement.disagreements] == ["ns/c", "ns/d"]
    assert agreement.disagreements[1].cause == "planned on n1 (m5.large, a), left Pending: no message"
    assert judge([], [], []).rate == 1.0


# ------------------------------------------------------------------ the cluster it runs on
@pytest.mark.parametrize(("controller", "last"), [(True, ["controller"]), (False, [])])
def test_a_cluster_without_the_controller_runs_the_webhook_and_the_extender_and_launches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, controller: bool, last: list[str]) -> None:
    local = LocalCluster("unit", Settings(cloud_provider="kwok", controller=controller), directory=tmp_path)
    local.ports = {"apiserver": 6443}
    started: list[str] = []
    for step in ("etcd", "apiserver", "controller_manager", "moto", "kwok", "webhook", "extender", "controller"):
        monkeypatch.setattr(local, f"_start_{step}", lambda *_, _step=step: started.append(_step))
    monkeypatch.setattr(local, "_start_scheduler",
                        lambda with_extender: started.append("scheduler(extender)" if with_extender else "scheduler"))
    for quiet in ("_apply_crds", "_register_webhooks", "_wait_default_service_account"):
        monkeypatch.setattr(local, quiet, lambda: None)
    local._start_all(lambda line: None)
    assert started == ["etcd", "apiserver", "controller_manager", "kwok", "webhook", "extender",
                       "scheduler(extender)", *last]
