"""The pure decisions of the lifecycle controllers, on wire-form dicts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from provisioner.clock import FakeClock, rfc3339
from provisioner.controllers import objects
from provisioner.controllers.counter import sum_capacity
from provisioner.controllers.emptiness import is_empty
from provisioner.controllers.garbagecollection import instance_id_of
from provisioner.controllers.provisioning import ProvisionResult, ReplacementError, replacement_nodes
from provisioner.controllers.result import Result
from provisioner.controllers.termination import drain_set, eviction_order
from provisioner.controllers.workqueue import WorkQueue


def pod(name: str, *, owner: str | None = "ReplicaSet", phase: str = "Running", deleting: str | None = None,
        critical: bool = False, tolerations: list[dict[str, str]] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o"}]
    if deleting:
        meta["deletionTimestamp"] = deleting
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {}
    if critical:
        spec["priorityClassName"] = "system-node-critical"
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


NOW = 1_767_225_600.0


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_emptiness_classes() -> None:
    assert is_empty([pod("ds", owner="DaemonSet"), pod("static", owner="Node"), pod("done", phase="Succeeded"),
                     pod("failed", phase="Failed"),
                     pod("mirror", owner=None, annotations={"kubernetes.io/config.mirror": "x"})])
    assert not is_empty([pod("ds", owner="DaemonSet"), pod("bare", owner=None)])
    assert not is_empty([pod("leaving", deleting=rfc3339(NOW + 30))])  # terminating still occupies
    assert is_empty([])


def test_drain_set_and_order() -> None:
    pods = [
        pod("web"), pod("dns", critical=True), pod("ds", owner="DaemonSet"), pod("static", owner="Node"),
        pod("tolerant", tolerations=[{"operator": "Exists"}]),
        pod("stuck", deleting=rfc3339(NOW - 1)), pod("leaving", deleting=rfc3339(NOW + 30)),
        pod("done", phase="Succeeded"),
    ]
    remaining = drain_set(pods, NOW)
    assert names(remaining) == ["web", "dns", "leaving"]
    assert names(eviction_order(remaining)) == ["web"]
    # a terminating non-critical pod still holds back the critical wave
    assert names(eviction_order([pod("dns", critical=True), pod("leaving", deleting=rfc3339(NOW + 30))])) == []
    assert names(eviction_order([pod("dns", critical=True)])) == ["dns"]


def test_unschedulable_toleration() -> None:
    key = "node.kubernetes.io/unschedulable"
    assert objects.tolerates_unschedulable(pod("a", tolerations=[{"key": key, "operator": "Exists", "effect": "NoSchedule"}]))
    assert objects.tolerates_unschedulable(pod("b", tolerations=[{"operator": "Exists"}]))
    assert not objects.tolerates_unschedulable(pod("c", tolerations=[{"key": key, "operator": "Exists", "effect": "NoExecute"}]))
    assert not objects.tolerates_unschedulable(pod("d", tolerations=[{"key": "other", "operator": "Exists"}]))


def test_odd_objects_do_not_crash() -> None:
    odd: dict[str, Any] = {"metadata": "x", "spec": {"taints": "no", "tolerations": 3}, "status": {"conditions": [1]}}
    assert objects.name(odd) == "" and objects.taints(odd) == [] and not objects.is_ready(odd)
    assert objects.created_at({"metadata": {"creationTimestamp": "yesterday"}}) is None
    assert not objects.tolerates_unschedulable(odd)
    malformed: dict[str, Any] = {"metadata": {"ownerReferences": "x", "annotations": 5}, "status": "gone"}
    assert not objects.is_daemonset_pod(malformed) and not objects.is_static_pod(malformed)
    assert not objects.is_terminal(malformed) and objects.is_occupant(malformed)


def test_sum_capacity_formats_quantities() -> None:
    nodes = [{"metadata": {"name": "a"}, "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"}}},
             {"metadata": {"name": "b"}, "status": {"capacity": {"cpu": "500m", "memory": "1024Mi", "pods": "8",
                                                                 "ephemeral-storage": "bogus"}}},
             {"metadata": {"name": "c"}}]
    assert sum_capacity(nodes) == {"cpu": "4500m", "memory": "17Gi", "pods": "66"}


def test_instance_id_of() -> None:
    assert instance_id_of("aws:///us-west-2a/i-0abc") == "i-0abc"
    assert instance_id_of("") == ""


def test_result_min() -> None:
    assert Result.min([Result.done(), Result.after(5), Result.after(2)]) == Result(2.0)
    assert Result.min([Result.done()]) == Result(None)
    assert Result.after(-3) == Result(0.0)


def test_replacement_nodes_from_a_provision_result() -> None:
    result = ProvisionResult(nodes=("new-1",), nominated_existing={"inflight": ("u1",)},
                             placed_existing={"ready": ("u2",), "old": ("u3",)})
    assert replacement_nodes(result, "old") == ["inflight", "new-1", "ready"]
    assert replacement_nodes(ProvisionResult(), "old") == []
    with pytest.raises(ReplacementError, match="default/web: limit cpu exceeded"):
        replacement_nodes(ProvisionResult(nodes=("n",), failed={"default/web": "limit cpu exceeded"}), "old")
    # a pod placed nowhere has nowhere to go either: the expiring node is kept
    with pytest.raises(ReplacementError, match="1 pod"):
        replacement_nodes(replace(result, unschedulable={"default/x": "no"}), "old")


def test_workqueue_dedupes_keeps_earliest_and_never_hands_out_twice() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock)
    queue.add("a", 10)
    queue.add("a", 5)
    queue.add("a", 20)
    assert queue.pop_due() is None
    clock.advance(5)
    assert queue.pop_due() == "a"
    queue.add("a")  # changed while processing: dirty, not handed out again yet
    assert queue.pop_due() is None
    queue.done("a")
    assert queue.pop_due() == "a"
    queue.done("a")
    assert [queue.add_rate_limited("b") for _ in range(4)] == [0.1, 0.2, 0.4, 0.8]
    queue.forget("b")
    assert queue.add_rate_limited("b") == 0.1


def test_guarded_patch_carries_the_read_resource_version_only_when_there_is_one() -> None:
    node = {"metadata": {"name": "n1", "resourceVersion": "42"}}
    assert objects.guarded(node, {"metadata": {"finalizers": None}}) == {
        "metadata": {"finalizers": None, "resourceVersion": "42"}}
    assert objects.guarded(node, {"spec": {"taints": []}}) == {
        "spec": {"taints": []}, "metadata": {"resourceVersion": "42"}}
    assert objects.guarded({"metadata": {"name": "n1"}}, {"spec": {"taints": []}}) == {"spec": {"taints": []}}
    assert objects.guarded({"metadata": "odd"}, {"spec": {}}) == {"spec": {}}
