from __future__ import annotations

import json
import logging

import pytest

from provisioner.controllers.expiration import REPLACEMENTS_ANNOTATION
from provisioner.controllers.manager import Manager
from provisioner.kube.fake import pod_is_healthy
from provisioner.model.labels import DISRUPTED_TAINT_KEY, LAUNCHED_AT_ANNOTATION
from provisioner.model.timestamps import rfc3339
from provisioner.settings import ControllerSettings

from .conftest import Cluster


def taint_keys(cluster: Cluster, node: str) -> list[str]:
    return [t["key"] for t in cluster.kube.get("Node", node)["spec"].get("taints", [])]


def inflate_healthy(cluster: Cluster) -> list[str]:
    pods, _ = cluster.kube.list("Pod", "default")
    return sorted(p["spec"]["nodeName"] for p in pods
                  if p["metadata"].get("labels", {}).get("app") == "inflate" and pod_is_healthy(p))


def expire_node_with_a_pod(cluster: Cluster) -> str:
    """A node of a Provisioner with a 60 s TTL, one pod on it, the clock moved to its expiry."""
    cluster.provisioner(ttlSecondsUntilExpired=60)
    old = cluster.node()["metadata"]["name"]
    cluster.pod("web", old)
    cluster.settle()
    cluster.step(60)
    return old


def test_expiry_with_pdb_min_available_2_never_drops_below_2(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.provisioner(ttlSecondsUntilExpired=1800)
    old = cluster.node()["metadata"]["name"]
    for i in range(3):
        cluster.pod(f"inflate-{i}", old, labels={"app": "inflate"})
    cluster.kube.create("PodDisruptionBudget", {"metadata": {"name": "inflate-pdb", "namespace": "default"},
                                                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "inflate"}}}})
    counts: list[int] = []
    cluster.kube.subscribe(lambda kind, event: counts.append(len(inflate_healthy(cluster))) if kind == "Pod" else None)
    starting: list[str] = []
    target: list[str] = []
    serial = iter(range(100))

    def replicaset(pod: dict) -> None:  # the ReplicaSet recreates each evicted pod on the new node
        if pod["metadata"].get("labels", {}).get("app") == "inflate":
            name = f"inflate-r{next(serial)}"
            cluster.pod(name, target[0], labels={"app": "inflate"}, phase="Pending")
            starting.append(name)

    cluster.kube.on_pod_deleted(replicaset)
    cluster.settle()
    cluster.step(1799)
    assert DISRUPTED_TAINT_KEY not in taint_keys(cluster, old)
    assert cluster.replacer.calls == []
    with caplog.at_level(logging.INFO):
        cluster.step(1)
        assert DISRUPTED_TAINT_KEY in taint_keys(cluster, old)
        assert cluster.replacer.calls == [(["inflate-0", "inflate-1", "inflate-2"], old)]
        recorded = json.loads(cluster.kube.get("Node", old)["metadata"]["annotations"][REPLACEMENTS_ANNOTATION])
        assert len(recorded) == 1 and recorded[0] != old
        target.append(recorded[0])
        assert {"Expired", "Replacing"} <= set(cluster.reasons(old))
        assert "Replacing" in cluster.reasons("inflate-0")
        cluster.step(30)  # replacement not Ready yet: the old node stays, no eviction
        assert cluster.exists("Node", old)
        assert not cluster.kube.get("Node", old)["metadata"].get("deletionTimestamp")
        assert [c for c in cluster.kube.calls if c[0] == "evict"] == []
        cluster.kubelet()  # the replacement turns Ready
        for _ in range(200):
            cluster.step(0.5)
            while starting:  # recreated pods start one step later
                cluster.kube.set_pod_running(starting.pop(), "default")
            if not cluster.exists("Node", old):
                break
    assert not cluster.exists("Node", old)
    assert min(counts) >= 2
    assert inflate_healthy(cluster) == [target[0]] * 3
    assert cluster.nodes() == [target[0]]
    assert [m.name for m in cluster.cloud.machines] == [target[0]]
    assert "Did not evict pod default/inflate-" in caplog.text
    assert "Deleted node " + old in caplog.text
    blocked = [c for c in cluster.kube.calls if c[0] == "evict"]
    assert len(blocked) > 3  # some evictions were refused by the PDB and retried


def test_pods_that_fit_elsewhere_mean_immediate_deletion(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsUntilExpired=60)
    old = cluster.node()["metadata"]["name"]
    cluster.pod("web", old)
    cluster.replacer.fit_elsewhere = True
    cluster.settle()
    cluster.step(60)
    assert cluster.replacer.calls == [(["web"], old)]
    assert not cluster.exists("Node", old)


def test_node_with_only_daemonsets_needs_no_replacement(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsUntilExpired=60)
    old = cluster.node()["metadata"]["name"]
    cluster.daemonset_pod("ds", old)
    cluster.settle()
    cluster.step(60)
    assert cluster.replacer.calls == []
    assert not cluster.exists("Node", old)


def test_unset_ttl_never_expires(cluster: Cluster) -> None:
    cluster.provisioner()
    old = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.step(365 * 24 * 3600)
    assert cluster.nodes() == [old]
    assert DISRUPTED_TAINT_KEY not in taint_keys(cluster, old)


def test_restart_mid_replacement_does_not_launch_twice(cluster: Cluster) -> None:
    old = expire_node_with_a_pod(cluster)
    assert len(cluster.replacer.calls) == 1
    # a new process: fresh memory, the same cluster
    cluster.manager = Manager(cluster.ctx, ControllerSettings(), replacer=cluster.replacer)
    cluster.kube.subscribe(cluster.manager.on_change)
    cluster.manager.resync()
    cluster.step(5)
    assert len(cluster.replacer.calls) == 1
    assert cluster.exists("Node", old)
    cluster.kubelet()
    cluster.step(5)
    assert not cluster.exists("Node", old)
    assert len(cluster.replacer.calls) == 1


def test_vanished_replacement_is_replaced_again(cluster: Cluster) -> None:
    old = expire_node_with_a_pod(cluster)
    first = json.loads(cluster.kube.get("Node", old)["metadata"]["annotations"][REPLACEMENTS_ANNOTATION])[0]
    cluster.kube.delete("Node", first)
    cluster.step(5)
    assert len(cluster.replacer.calls) == 2
    second = json.loads(cluster.kube.get("Node", old)["metadata"]["annotations"][REPLACEMENTS_ANNOTATION])[0]
    assert second != first
    assert cluster.exists("Node", old)


def test_failed_replacement_keeps_the_node_and_retries(cluster: Cluster) -> None:
    from provisioner.cloudprovider.types import InsufficientCapacityError

    cluster.provisioner(ttlSecondsUntilExpired=60)
    old = cluster.node()["metadata"]["name"]
    cluster.pod("web", old)
    calls = []

    def failing(pods, node_name):  # type: ignore[no-untyped-def]
        calls.append(node_name)
        if len(calls) == 1:
            raise InsufficientCapacityError("no capacity for m5.large in us-west-2a")
        return cluster.replacer(pods, node_name)

    cluster.manager.expiration.replacer = failing
    cluster.settle()
    cluster.step(60)
    assert calls == [old]
    assert cluster.exists("Node", old) and not cluster.kube.get("Node", old)["metadata"].get("deletionTimestamp")
    assert "ReplacementFailed" in cluster.reasons(old)
    cluster.step(30)
    assert calls == [old, old]
    assert REPLACEMENTS_ANNOTATION in cluster.kube.get("Node", old)["metadata"]["annotations"]


def test_removing_the_ttl_mid_replacement_cancels_the_expiry(cluster: Cluster) -> None:
    old = expire_node_with_a_pod(cluster)
    assert DISRUPTED_TAINT_KEY in taint_keys(cluster, old)
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsUntilExpired": None}})
    cluster.settle()
    assert DISRUPTED_TAINT_KEY not in taint_keys(cluster, old)
    assert REPLACEMENTS_ANNOTATION not in cluster.kube.get("Node", old)["metadata"].get("annotations", {})
    cluster.kubelet()
    cluster.step(60)
    assert cluster.exists("Node", old) and not cluster.kube.get("Node", old)["metadata"].get("deletionTimestamp")


def test_expiry_counts_from_the_instance_launch_not_the_node_creation(cluster: Cluster) -> None:
    # an instance adopted 50 s after its launch: its Node is 50 s younger than the instance
    cluster.provisioner(ttlSecondsUntilExpired=60)
    old = cluster.node()["metadata"]["name"]
    cluster.kube.patch("Node", old, {"metadata": {"annotations": {
        LAUNCHED_AT_ANNOTATION: rfc3339(cluster.clock.now() - 50)}}})
    cluster.pod("web", old)
    cluster.settle()
    cluster.step(9)
    assert cluster.replacer.calls == []
    cluster.step(1)
    assert len(cluster.replacer.calls) == 1
    assert DISRUPTED_TAINT_KEY in taint_keys(cluster, old)
