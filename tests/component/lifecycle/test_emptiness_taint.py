"""Emptiness writes its decision as the karpenter.sh/disrupted taint before deleting, and takes it back if a pod arrives.

A pod kube-scheduler binds between "empty past ttlSecondsAfterEmpty" and the cordon would be
evicted by the drain (a bare pod is lost): the taint keeps the scheduler off at once, the
deletion waits TAINT_SETTLE_SECONDS and checks emptiness again.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender import handlers
from extender.state import ProvisionerInfo, build_state
from provisioner.clock import rfc3339
from provisioner.controllers.emptiness import TAINT_SETTLE_SECONDS
from provisioner.controllers.objects import DISRUPTION_REASON_ANNOTATION
from provisioner.kube.api import ConflictError
from provisioner.model.labels import DISRUPTED_TAINT_KEY, EMPTINESS_TIMESTAMP_ANNOTATION

from .conftest import Cluster

DISRUPTED = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


def marks(cluster: Cluster, node: str) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """(taints, disruption-reason annotation, emptiness timestamp) of the node as stored."""
    obj = cluster.kube.get("Node", node)
    annotations = obj["metadata"].get("annotations") or {}
    return (obj["spec"].get("taints") or [], annotations.get(DISRUPTION_REASON_ANNOTATION),
            annotations.get(EMPTINESS_TIMESTAMP_ANNOTATION))


def deleting(cluster: Cluster, node: str) -> bool:
    return cluster.kube.get("Node", node)["metadata"].get("deletionTimestamp") is not None


def test_empty_node_is_tainted_first_then_deleted_once_the_taint_settled(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    cluster.daemonset_pod("ds-a", node)
    start = cluster.clock.now()
    cluster.settle()
    cluster.step(30)
    # one write: taint and reason together (expiration, reconciled on the same change, left them)
    assert marks(cluster, node) == ([DISRUPTED], "emptiness", rfc3339(start))
    assert not deleting(cluster, node)
    assert [c for c in cluster.kube.calls if c[0] == "delete" and c[1] == "Node"] == []
    cluster.step(TAINT_SETTLE_SECONDS - 1)
    assert not deleting(cluster, node)
    cluster.step(1)
    assert cluster.nodes() == []
    assert cluster.cloud.delete_calls == [f"aws:///us-west-2a/i-{1:017x}"]
    assert {"Empty", "Terminated"} <= set(cluster.reasons(node))


def test_the_tainted_node_is_rejected_by_the_extender(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    other = cluster.node()["metadata"]["name"]
    cluster.pod("keep", other)
    cluster.settle()
    cluster.step(30)
    nodes, _ = cluster.kube.list("Node")
    state = build_state(nodes, [], [ProvisionerInfo("default")], existing_provisioners=["default"])
    pod = {"metadata": {"name": "late", "namespace": "default", "uid": "u-late"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    answer = handlers.filter({"Pod": pod, "NodeNames": [node, other]}, state, cluster.clock.now())
    assert answer["NodeNames"] == [other]
    assert answer["FailedAndUnresolvableNodes"] == {node: handlers.REASON_DISRUPTED}


def test_pod_bound_after_the_taint_keeps_the_node_and_lifts_the_taint(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.step(30)
    assert marks(cluster, node)[:2] == ([DISRUPTED], "emptiness")
    cluster.step(TAINT_SETTLE_SECONDS / 2)
    cluster.pod("bare", node, owner=None)  # the scheduler decided before it saw the taint
    cluster.settle()
    assert marks(cluster, node) == ([], None, None)
    assert "EmptinessCancelled" in cluster.reasons(node)
    cluster.step(3600)
    assert cluster.nodes() == [node] and not deleting(cluster, node)
    assert [c for c in cluster.kube.calls if c[0] == "evict"] == []
    # the pod leaves: the clock starts again from then, and the same two steps follow
    cluster.kube.delete("Pod", "bare", "default")
    left = cluster.clock.now()
    cluster.settle()
    assert marks(cluster, node) == ([], None, rfc3339(left))
    cluster.step(30)
    assert marks(cluster, node)[:2] == ([DISRUPTED], "emptiness")
    cluster.step(TAINT_SETTLE_SECONDS)
    assert cluster.nodes() == []


def test_other_taints_survive_the_taint_and_its_removal(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    dedicated = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    node = cluster.node(taints=[dedicated])["metadata"]["name"]
    cluster.settle()
    cluster.step(30)
    assert marks(cluster, node)[0] == [dedicated, DISRUPTED]
    cluster.pod("web", node, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    cluster.settle()
    assert marks(cluster, node) == ([dedicated], None, None)


def test_raising_the_ttl_after_the_taint_lifts_it(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    start = cluster.clock.now()
    cluster.settle()
    cluster.step(30)
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsAfterEmpty": 600}})
    cluster.settle()
    assert marks(cluster, node) == ([], None, rfc3339(start))  # still empty since then
    cluster.step(TAINT_SETTLE_SECONDS)
    assert cluster.nodes() == [node]
    cluster.step(600 - 30 - TAINT_SETTLE_SECONDS)
    assert marks(cluster, node)[:2] == ([DISRUPTED], "emptiness")


def test_removing_the_ttl_after_the_taint_lifts_it_and_the_timestamp(cluster: Cluster) -> None:
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.step(30)
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsAfterEmpty": None}})
    cluster.settle()
    assert marks(cluster, node) == ([], None, None)
    cluster.step(3600)
    assert cluster.nodes() == [node]


def test_expiration_never_lifts_the_emptiness_taint() -> None:
    cluster = Cluster()
    cluster.provisioner(ttlSecondsAfterEmpty=30)  # no ttlSecondsUntilExpired: expiration would cancel its own taint
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.step(30)
    cluster.manager.expiration.reconcile(cluster.kube.get("Node", node))
    assert marks(cluster, node)[:2] == ([DISRUPTED], "emptiness")


@pytest.mark.parametrize("reason", [None, "provisioner-deleted"])
def test_a_disrupted_taint_set_by_another_controller_is_never_lifted(reason: str | None) -> None:
    """Expiration (no reason) or ownership set it: a pod on the node clears the timestamp only."""
    cluster = Cluster()
    cluster.provisioner(ttlSecondsAfterEmpty=30, ttlSecondsUntilExpired=10 ** 6)
    node = cluster.node(taints=[DISRUPTED])["metadata"]["name"]
    if reason:
        cluster.kube.patch("Node", node, {"metadata": {"annotations": {DISRUPTION_REASON_ANNOTATION: reason}}})
    cluster.pod("web", node)
    cluster.manager.emptiness.reconcile(cluster.kube.get("Node", node))
    assert marks(cluster, node) == ([DISRUPTED], reason, None)


def test_empty_node_already_tainted_by_another_controller_is_deleted_at_its_ttl() -> None:
    cluster = Cluster()
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node(taints=[DISRUPTED])["metadata"]["name"]
    cluster.kube.patch("Node", node, {"metadata": {"annotations": {DISRUPTION_REASON_ANNOTATION: "provisioner-deleted"}}})
    cluster.manager.emptiness.reconcile(cluster.kube.get("Node", node))  # starts the clock
    cluster.clock.advance(30)
    cluster.manager.emptiness.reconcile(cluster.kube.get("Node", node))
    assert deleting(cluster, node)
    assert marks(cluster, node)[:2] == ([DISRUPTED], "provisioner-deleted")


def with_preconditions(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Make the fake's merge patches honour ``metadata.resourceVersion`` as the API server does (409 when stale).

    FakeKubeAPI applies such a patch unconditionally; returns the list the patch bodies are recorded in.
    """
    bodies: list[dict[str, Any]] = []
    patch = cluster.kube.patch

    def checked(kind: str, name: str, body: Any, namespace: str | None = None,
                subresource: str | None = None) -> dict[str, Any]:
        bodies.append(body)
        wanted = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if wanted and wanted != cluster.kube.get(kind, name, namespace)["metadata"]["resourceVersion"]:
            raise ConflictError(f"the object has been modified; resourceVersion {wanted} is stale")
        return patch(kind, name, body, namespace, subresource)

    monkeypatch.setattr(cluster.kube, "patch", checked)
    return bodies


def test_the_taint_is_conditional_on_the_resource_version_read(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster()
    cluster.provisioner(ttlSecondsAfterEmpty=30)
    node = cluster.node()["metadata"]["name"]
    cluster.settle()
    cluster.clock.advance(30)
    stale = cluster.kube.get("Node", node)
    bodies = with_preconditions(cluster, monkeypatch)
    other = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    cluster.kube.patch("Node", node, {"spec": {"taints": [other]}})  # another writer, after our read
    with pytest.raises(ConflictError):
        cluster.manager.emptiness.reconcile(stale)
    assert bodies[-1] == {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"],
                                       "annotations": {DISRUPTION_REASON_ANNOTATION: "emptiness"}},
                          "spec": {"taints": [DISRUPTED]}}
    assert marks(cluster, node)[:2] == ([other], None)
    cluster.manager.emptiness.reconcile(cluster.kube.get("Node", node))  # the retry reads afresh
    assert marks(cluster, node)[:2] == ([other, DISRUPTED], "emptiness")
    assert not deleting(cluster, node)
