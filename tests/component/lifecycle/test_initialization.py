from __future__ import annotations

from provisioner.clock import rfc3339
from provisioner.model import nominations
from provisioner.model.labels import NOMINATIONS_ANNOTATION, NOT_READY_TAINT_KEY

from .conftest import Cluster


def annotations(cluster: Cluster, node: str) -> dict[str, str]:
    return cluster.kube.get("Node", node)["metadata"].get("annotations", {})


def nominate(cluster: Cluster, node: str, deadline: float) -> None:
    value = nominations.encode(nominations.nominate(nominations.EMPTY, "uid-1", "default/web", {"cpu": 500}, deadline))
    cluster.kube.patch("Node", node, {"metadata": {"annotations": {NOMINATIONS_ANNOTATION: value}}})


def test_ready_node_loses_the_startup_taint_and_its_nomination_deadline_moves(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node(ready=False, taints=[{"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"},
                                              {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    name = node["metadata"]["name"]
    start = cluster.clock.now()
    nominate(cluster, name, start + 900)
    cluster.step(40)
    assert [t["key"] for t in cluster.kube.get("Node", name)["spec"]["taints"]] == [NOT_READY_TAINT_KEY, "dedicated"]
    cluster.kubelet()
    cluster.settle()
    assert cluster.kube.get("Node", name)["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    moved = nominations.decode(annotations(cluster, name)[NOMINATIONS_ANNOTATION])
    assert moved.deadline == start + 40 + 300  # Ready + nomination TTL (300 s default)
    assert list(moved.pods) == ["uid-1"]
    cluster.step(299)
    assert NOMINATIONS_ANNOTATION in annotations(cluster, name)
    cluster.step(1)
    assert NOMINATIONS_ANNOTATION not in annotations(cluster, name)


def test_node_not_ready_after_registration_timeout_is_terminated(cluster: Cluster) -> None:
    cluster.provisioner()
    name = cluster.node(ready=False)["metadata"]["name"]
    cluster.settle()
    cluster.step(899)
    assert cluster.exists("Node", name)
    cluster.step(1)
    assert not cluster.exists("Node", name)
    assert cluster.cloud.machines == []
    assert "FailedToBecomeReady" in cluster.reasons(name)


def test_registration_timeout_is_settable() -> None:
    from provisioner.settings import ControllerSettings, NodeDefaults

    from .conftest import Cluster as C

    cluster = C(ControllerSettings(nodes=NodeDefaults(registration_timeout_seconds=120)))
    cluster.provisioner()
    name = cluster.node(ready=False)["metadata"]["name"]
    cluster.settle()
    cluster.step(119)
    assert cluster.exists("Node", name)
    cluster.step(1)
    assert not cluster.exists("Node", name)


def test_expired_nomination_is_pruned_and_malformed_one_dropped(cluster: Cluster) -> None:
    cluster.provisioner()
    a = cluster.node()["metadata"]["name"]
    b = cluster.node()["metadata"]["name"]
    cluster.settle()
    nominate(cluster, a, cluster.clock.now() + 10)
    cluster.kube.patch("Node", b, {"metadata": {"annotations": {NOMINATIONS_ANNOTATION: "{not json"}}})
    cluster.settle()
    assert NOMINATIONS_ANNOTATION in annotations(cluster, a)
    assert NOMINATIONS_ANNOTATION not in annotations(cluster, b)
    cluster.step(10)
    assert NOMINATIONS_ANNOTATION not in annotations(cluster, a)
    assert rfc3339(cluster.clock.now())  # clock still sane
