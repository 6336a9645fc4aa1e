"""A pod waits for the node the controller launched for it: the controller's Nodes, the extender's live state.

The provisioning controller launches two nodes for four pending pods (three on one, one on the
other, with room to spare); the initialization controller untaints each once its kubelet
reports Ready; the extender reads the cluster state cache as ``groupless extender`` does. The
candidate lists are what kube-scheduler would send: a node is left out while it carries the
startup taint ``karpenter.sh/not-ready``.
"""

from __future__ import annotations

import json
from typing import Any

from extender import handlers
from extender.live import LiveState
from provisioner.controllers.initialization import InitializationController
from provisioner.controllers.objects import Context
from provisioner.model import labels as wk
from tests.component.provisioning.harness import Cluster

NOT_ITS_NODE = "node is not the one launched for this pod"


def nominated(cluster: Cluster, node: str) -> list[str]:
    """The names of the pods nominated to ``node``, sorted."""
    raw = cluster.api.get("Node", node)["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
    return sorted(entry["pod"].split("/")[1] for entry in json.loads(raw)["pods"].values()) if raw else []


class Scheduler:
    """Asks the extender as kube-scheduler does (``nodeCacheCapable: true``), from a fresh state each time."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.live = LiveState(cluster.state)

    def filter(self, pod: str, candidates: list[str]) -> dict[str, Any]:
        self.live.refresh()
        request = {"Pod": self.cluster.api.get("Pod", pod, "default"), "Nodes": None, "NodeNames": candidates}
        return handlers.filter(request, self.live(), self.cluster.clock.now())


def up(cluster: Cluster, node: str) -> None:
    """The kubelet reports Ready and the initialization controller removes the startup taint."""
    cluster.api.set_node_ready(node)
    initialization = InitializationController(Context(kube=cluster.api, cloud=cluster.cloud, clock=cluster.clock))
    initialization.reconcile(cluster.api.get("Node", node))
    assert not cluster.api.get("Node", node)["spec"].get("taints")


def launch_two() -> tuple[Cluster, str, str]:
    """Four 1-cpu pods launched for: (cluster, the node of three, the node of one)."""
    cluster = Cluster()
    for _ in range(4):
        cluster.pending_pod(cpu="1")
    result = cluster.controller.reconcile()
    full, partial = sorted(result.nodes, key=lambda node: -len(nominated(cluster, node)))
    assert (len(nominated(cluster, full)), len(nominated(cluster, partial))) == (3, 1)
    return cluster, full, partial


def test_a_pod_waits_for_its_node_while_another_launched_node_has_room() -> None:
    cluster, full, partial = launch_two()
    scheduler = Scheduler(cluster)
    waiting, *_ = nominated(cluster, full)
    (own,) = nominated(cluster, partial)
    up(cluster, partial)  # 3.82 cpu, 1 held for its pod: 2.82 cpu free for others

    assert scheduler.filter(waiting, [partial]) == {
        "Nodes": None, "NodeNames": [], "FailedNodes": {},
        "FailedAndUnresolvableNodes": {partial: NOT_ITS_NODE}, "Error": "",
    }
    assert scheduler.filter(own, [partial])["NodeNames"] == [partial]
    # a pod nominated nowhere may use the free room, and not the room held for the node's own pod
    late = cluster.pending_pod(cpu="1")["metadata"]["name"]
    assert scheduler.filter(late, [partial])["NodeNames"] == [partial]
    large = cluster.pending_pod(cpu="3")["metadata"]["name"]
    assert scheduler.filter(large, [partial])["FailedNodes"] == {partial: "node is reserved for nominated pods"}

    up(cluster, full)
    assert scheduler.filter(waiting, [full, partial]) == {
        "Nodes": None, "NodeNames": [full], "FailedNodes": {},
        "FailedAndUnresolvableNodes": {partial: NOT_ITS_NODE}, "Error": "",
    }


def test_a_node_that_never_starts_frees_its_pods_and_they_are_provisioned_again() -> None:
    cluster, full, partial = launch_two()
    scheduler = Scheduler(cluster)
    waiting = nominated(cluster, full)
    (own,) = nominated(cluster, partial)
    up(cluster, partial)
    cluster.api.bind(own, "default", partial)  # 2.82 cpu left there
    assert [scheduler.filter(pod, [partial])["NodeNames"] for pod in waiting] == [[], [], []]

    # 15 minutes later the node is still not Ready: the initialization controller deletes it (its
    # termination finalizer keeps the Node a moment longer)
    cluster.clock.advance(901)
    InitializationController(Context(kube=cluster.api, cloud=cluster.cloud, clock=cluster.clock)).reconcile(
        cluster.api.get("Node", full))
    assert cluster.api.get("Node", full)["metadata"].get("deletionTimestamp")
    assert nominated(cluster, full) == waiting  # the annotation is still there; it holds nothing
    assert [scheduler.filter(pod, [partial])["NodeNames"] for pod in waiting] == [[partial], [partial], [partial]]
    # and the controller provisions for them at once: two fit beside the bound pod, one gets a node
    result = cluster.controller.reconcile()
    names = {cluster.api.get("Pod", pod, "default")["metadata"]["uid"]: pod for pod in waiting}
    assert result.pods == 3 and len(result.nodes) == 1
    placed = sorted(names[uid] for uid in result.placed_existing[partial])
    (new,) = result.nodes
    assert len(placed) == 2 and sorted(placed + nominated(cluster, new)) == waiting
