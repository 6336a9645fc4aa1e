from __future__ import annotations

from provisioner.clock import rfc3339
from provisioner.controllers.emptiness import TAINT_SETTLE_SECONDS
from provisioner.model.labels import EMPTINESS_TIMESTAMP_ANNOTATION, NOT_READY_TAINT_KEY

from .conftest import Cluster


def annotation(cluster: Cluster, node: str) -> str | None:
    return cluster.kube.get("Node", node)["metadata"].get("annotations", {}).get(EMPTINESS_TIMESTAMP_ANNOTATION)


def test_daemonset_only_node_is_emptied_after_ttl_and_not_before(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    cluster.daemonset_pod("ds-a", node)
    cluster.pod("mirror", node, owner="Node")
    cluster.pod("job", node, phase="Succeeded")
    start = cluster.clock.now()
    cluster.settle()
    assert annotation(cluster, node) == rfc3339(start)
    cluster.step(29)
    assert cluster.nodes() == [node]
    assert cluster.kube.get("Node", node)["metadata"].get("deletionTimestamp") is None
    cluster.step(1)  # tainted karpenter.sh/disrupted first; deleted once the taint has settled
    cluster.step(TAINT_SETTLE_SECONDS)
    assert cluster.nodes() == []
    assert cluster.cloud.machines == []
    assert cluster.cloud.delete_calls == [f"aws:///us-west-2a/i-{1:017x}"]
    assert {"Empty", "Terminated"} <= set(cluster.reasons(node))
    # DaemonSet and static pods were never evicted
    assert [c for c in cluster.kube.calls if c[0] == "evict"] == []


def test_arriving_pod_resets_the_timestamp(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    start = cluster.clock.now()
    cluster.settle()
    assert annotation(cluster, node) == rfc3339(start)
    cluster.step(20)
    cluster.pod("web", node)
    cluster.settle()
    assert annotation(cluster, node) is None
    cluster.step(20)  # t+40: past the first deadline, but the node is occupied
    assert cluster.nodes() == [node]
    cluster.kube.delete("Pod", "web", "default")
    cluster.settle()
    assert annotation(cluster, node) == rfc3339(start + 40)
    cluster.step(29)
    assert cluster.nodes() == [node]
    cluster.step(1)
    cluster.step(TAINT_SETTLE_SECONDS)
    assert cluster.nodes() == []


def test_terminating_pod_is_still_an_occupant(cluster: Cluster) -> None:
    cluster.kube.pod_grace_seconds = 60
    cluster.provisioner(ttlSecondsAfterEmpty=10)
    node = cluster.node()["metadata"]["name"]
    cluster.pod("web", node)
    cluster.settle()
    cluster.kube.delete("Pod", "web", "default")  # lingers 60 s with a deletionTimestamp
    cluster.step(30)
    assert annotation(cluster, node) is None
    assert cluster.nodes() == [node]
    cluster.step(30)  # grace over: the pod is gone, the clock starts
    assert annotation(cluster, node) == rfc3339(cluster.clock.now())
    cluster.step(10)
    cluster.step(TAINT_SETTLE_SECONDS)
    assert cluster.nodes() == []


def test_unset_ttl_never_empties(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.step(10 * 24 * 3600)
    assert annotation(cluster, node) is None
    assert cluster.nodes() == [node]


def test_not_ready_node_is_not_empty_yet(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=5)
    node = cluster.node(ready=False)["metadata"]["name"]
    cluster.step(60)
    assert annotation(cluster, node) is None
    assert cluster.nodes() == [node]
    assert cluster.kube.get("Node", node)["spec"]["taints"] == [{"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]


def test_removing_the_ttl_clears_the_annotation(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=300)
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    assert annotation(cluster, node) is not None
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsAfterEmpty": None}})
    cluster.settle()
    assert annotation(cluster, node) is None
    cluster.step(600)
    assert cluster.nodes() == [node]
