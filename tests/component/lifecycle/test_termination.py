from __future__ import annotations

import logging

import pytest

from provisioner.model.labels import TERMINATION_FINALIZER

from .conftest import Cluster


def evictions(cluster: Cluster) -> list[str]:
    return [name for verb, kind, name in cluster.kube.calls if verb == "evict"]


def test_drain_evicts_all_but_daemonset_static_and_terminating_then_terminates(cluster: Cluster) -> None:
    cluster.kube.pod_grace_seconds = 30
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.pod("web-1", node)
    cluster.pod("web-2", node)
    cluster.daemonset_pod("ds", node)
    cluster.pod("mirror", node, owner="Node")
    cluster.pod("leaving", node)
    cluster.kube.delete("Pod", "leaving", "default")  # terminating already: not evicted again
    cluster.settle()
    cluster.kube.delete("Node", node)
    cluster.settle()
    assert cluster.kube.get("Node", node)["spec"]["unschedulable"] is True
    assert sorted(evictions(cluster)) == ["web-1", "web-2"]
    # evicted pods linger for their grace period: the node waits for them
    assert cluster.exists("Node", node)
    assert cluster.cloud.delete_calls == []
    cluster.step(30)
    assert not cluster.exists("Node", node)
    assert cluster.cloud.delete_calls == [f"aws:///us-west-2a/i-{1:017x}"]
    assert cluster.exists("Pod", "ds", "default") and cluster.exists("Pod", "mirror", "default")
    assert "Evicted" in cluster.reasons("web-1")
    assert {"Evicted", "Terminated"} <= set(cluster.reasons(node))


def test_critical_pods_are_evicted_after_the_others(cluster: Cluster) -> None:
    cluster.kube.pod_grace_seconds = 5
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.pod("dns", node, priority_class="system-cluster-critical")
    cluster.pod("agent", node, priority_class="system-node-critical")
    cluster.pod("web", node)
    cluster.settle()
    cluster.kube.delete("Node", node)
    cluster.settle()
    assert evictions(cluster) == ["web"]
    cluster.step(5)
    assert sorted(evictions(cluster)) == ["agent", "dns", "web"]
    assert evictions(cluster)[0] == "web"
    cluster.step(5)
    assert not cluster.exists("Node", node)


def test_do_not_evict_blocks_the_drain_until_the_pod_leaves(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.pod("precious", node, annotations={"karpenter.sh/do-not-evict": "true"})
    cluster.pod("web", node)
    cluster.settle()
    cluster.kube.delete("Node", node)
    for _ in range(6):
        cluster.step(10)
    assert cluster.exists("Node", node)
    assert evictions(cluster) == []
    assert cluster.cloud.delete_calls == []
    blocked = cluster.kube.events(reason="DrainBlocked", involved_name=node)
    assert len(blocked) == 1 and blocked[0]["type"] == "Warning"
    assert "do-not-evict" in blocked[0]["message"] and "default/precious" in blocked[0]["message"]
    assert "DrainBlocked" in cluster.reasons("precious")
    cluster.kube.delete("Pod", "precious", "default")  # its owner moves it away
    cluster.step(10)
    assert evictions(cluster) == ["web"]
    assert not cluster.exists("Node", node)


def test_pdb_429_backs_off_per_pod_and_logs(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    other = cluster.node()["metadata"]["name"]
    cluster.pod("a", node, labels={"app": "a"})
    cluster.pod("b", other, labels={"app": "a"})
    cluster.kube.create("PodDisruptionBudget", {"metadata": {"name": "a", "namespace": "default"},
                                                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}}})
    cluster.settle()
    cluster.kube.delete("Node", node)
    with caplog.at_level(logging.INFO):
        cluster.settle()
        times = []
        for _ in range(200):  # 20 s in 100 ms steps
            before = len(evictions(cluster))
            cluster.step(0.1)
            if len(evictions(cluster)) > before:
                times.append(round(cluster.clock.now() % 1000, 1))
    attempts = len(evictions(cluster))
    # 100 ms, 200, 400, 800, 1.6 s, 3.2, 6.4, then 10 s: 1 + 8 attempts within ~20 s
    assert 8 <= attempts <= 10
    gaps = [round(b - a, 1) for a, b in zip(times, times[1:], strict=False)]
    assert gaps[:5] == [0.2, 0.4, 0.8, 1.6, 3.2]
    assert max(gaps) <= 10.0
    assert "Did not evict pod default/a due to PDB violation" in caplog.text
    assert cluster.exists("Node", node)
    assert len(cluster.kube.events(reason="DrainBlocked", involved_name="a")) == 1
    assert "PDB" in cluster.kube.events(reason="DrainBlocked", involved_name="a")[0]["message"]


def test_instance_already_gone_is_fine(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()
    cluster.cloud.terminate_out_of_band(node["spec"]["providerID"])
    cluster.kube.delete("Node", node["metadata"]["name"])
    cluster.settle()
    assert not cluster.exists("Node", node["metadata"]["name"])


def test_missing_finalizer_is_added(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.kube.patch("Node", node, {"metadata": {"finalizers": None}})
    cluster.settle()
    assert cluster.kube.get("Node", node)["metadata"]["finalizers"] == [TERMINATION_FINALIZER]


def test_concurrent_drains_share_the_pdb_budget(cluster: Cluster) -> None:
    """Two nodes draining at once never take the PDB below minAvailable (the API server arbitrates)."""
    cluster.provisioner()
    first = cluster.node()["metadata"]["name"]
    second = cluster.node()["metadata"]["name"]
    spare = cluster.node()["metadata"]["name"]
    for i, node in enumerate([first, first, second, second]):
        cluster.pod(f"web-{i}", node, labels={"app": "web"})
    cluster.kube.create("PodDisruptionBudget", {"metadata": {"name": "web", "namespace": "default"},
                                                "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}})
    replacements = iter(range(100))
    pending: list[str] = []

    def replicaset(pod: dict) -> None:
        if pod["metadata"].get("labels", {}).get("app") == "web":
            name = f"web-r{next(replacements)}"
            cluster.pod(name, spare, labels={"app": "web"}, phase="Pending")
            pending.append(name)

    cluster.kube.on_pod_deleted(replicaset)
    low = []

    def healthy() -> int:
        pods, _ = cluster.kube.list("Pod", "default")
        from provisioner.kube.fake import pod_is_healthy
        return sum(1 for p in pods if p["metadata"].get("labels", {}).get("app") == "web" and pod_is_healthy(p))

    cluster.kube.subscribe(lambda kind, event: low.append(healthy()) if kind == "Pod" else None)
    cluster.settle()
    cluster.kube.delete("Node", first)
    cluster.kube.delete("Node", second)
    for _ in range(300):
        cluster.step(0.5)
        while pending:  # the replacement pod starts a step later
            cluster.kube.set_pod_running(pending.pop(), "default")
        if not cluster.exists("Node", first) and not cluster.exists("Node", second):
            break
    assert not cluster.exists("Node", first) and not cluster.exists("Node", second)
    assert min(low) >= 3
    assert healthy() == 4


def test_pod_under_two_pdbs_blocks_with_a_misconfiguration_event(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.pod("web", node, labels={"app": "web"})
    for name in ("one", "two"):
        cluster.kube.create("PodDisruptionBudget", {"metadata": {"name": name, "namespace": "default"},
                                                    "spec": {"maxUnavailable": 1,
                                                             "selector": {"matchLabels": {"app": "web"}}}})
    cluster.settle()
    cluster.kube.delete("Node", node)
    for _ in range(20):
        cluster.step(1)
    assert cluster.exists("Pod", "web", "default") and cluster.exists("Node", node)
    [event] = cluster.kube.events(reason="DrainBlocked", involved_name="web")
    assert "PDB misconfiguration" in event["message"] and event["type"] == "Warning"
    cluster.kube.delete("PodDisruptionBudget", "two", "default")
    cluster.step(10)
    assert not cluster.exists("Node", node)
