"""Nomination writes: off the round, a bounded number at once, one per node.

On a loaded API server a Node patch takes hundreds of milliseconds; a round that pruned its
nodes one patch at a time held the provisioning loop for minutes at 5,000 pods. The prune
writes now run on the nominations pool while the round goes on, and the pods of one round
placed on several in-flight nodes are written to those nodes concurrently. These tests hold
the API's Node patches at a gate to see what runs while they wait.
"""

import json
import threading

from provisioner.controllers.provisioning.nominations import WRITE_PARALLELISM
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.state.solverinput import read_pods

from .harness import Cluster


class GatedPatches:
    """Holds every JSON patch of a Node (a nominations write) until :meth:`release`; counts them."""

    def __init__(self, api):
        self.api = api
        self.patch = api.patch
        self.gate = threading.Event()
        self.cond = threading.Condition()
        self.waiting = 0
        self.most_waiting = 0
        self.nodes = []
        api.patch = self._patch

    def _patch(self, kind, name, patch, namespace=None, subresource=None):
        if kind == "Node":
            with self.cond:
                self.nodes.append(name)
                self.waiting += 1
                self.most_waiting = max(self.most_waiting, self.waiting)
                self.cond.notify_all()
            assert self.gate.wait(30), "the test never released the gate"
            with self.cond:
                self.waiting -= 1
        return self.patch(kind, name, patch, namespace, subresource)

    def wait_for(self, count):
        """Block until ``count`` patches wait at the gate (30 s bound against a hang); True when they do."""
        with self.cond:
            return self.cond.wait_for(lambda: self.waiting >= count, 30)

    def release(self):
        self.gate.set()


def nominated_node(cluster, name, pods):
    """A Node of ours carrying nominations for ``pods`` (pod objects or absent-pod UIDs)."""
    nominations = nom.EMPTY
    for index, pod in enumerate(pods):
        uid = pod if isinstance(pod, str) else pod["metadata"]["uid"]
        key = f"default/gone-{index}" if isinstance(pod, str) else f"default/{pod['metadata']['name']}"
        nominations = nom.nominate(nominations, uid, key, {"cpu": 1000, "pods": 1}, cluster.clock.now() + 600)
    return cluster.api.create("Node", {
        "metadata": {
            "name": name,
            "labels": {wk.PROVISIONER_NAME: "default", wk.INSTANCE_TYPE: "r6gd.xlarge", wk.ZONE: "ap-south-1a"},
            "annotations": {wk.NOMINATIONS_ANNOTATION: nom.encode(nominations)},
        },
        "spec": {"providerID": f"fake:///{name}"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"}},
    })


def annotation(cluster, name):
    return cluster.api.get("Node", name)["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)


def test_a_round_does_not_wait_for_its_prune_writes():
    cluster = Cluster()
    nominated_node(cluster, "node-a", ["uid-of-a-deleted-pod"])
    gated = GatedPatches(cluster.api)

    done = cluster.controller.begin()  # nothing pending: the round is its prune
    assert done.result(timeout=30).pods == 0
    assert gated.wait_for(1)
    assert annotation(cluster, "node-a") is not None  # the write waits at the gate; the round ended
    again = cluster.controller.begin()  # the next round does not write the node again meanwhile
    assert again.result(timeout=30).pods == 0

    gated.release()
    cluster.controller.provisioner.nominations.flush(timeout=30)
    assert annotation(cluster, "node-a") is None
    assert gated.nodes == ["node-a"]


def test_prune_writes_run_a_bounded_number_at_once():
    cluster = Cluster()
    names = [f"node-{i:02d}" for i in range(WRITE_PARALLELISM + 4)]
    for name in names:
        nominated_node(cluster, name, [f"deleted-{name}"])
    gated = GatedPatches(cluster.api)

    cluster.controller.begin().result(timeout=30)
    assert gated.wait_for(WRITE_PARALLELISM)
    assert gated.waiting == WRITE_PARALLELISM  # the others are queued behind them

    gated.release()
    cluster.controller.provisioner.nominations.flush(timeout=30)
    assert gated.most_waiting == WRITE_PARALLELISM
    assert sorted(gated.nodes) == names
    assert [annotation(cluster, name) for name in names] == [None] * len(names)


def test_an_entry_that_ended_goes_with_the_last_one():
    cluster = Cluster()
    pending = cluster.pending_pod()
    nominated_node(cluster, "node-a", ["uid-of-a-deleted-pod", pending])

    cluster.controller.reconcile()
    # the deleted pod's entry holds no room for any reader: not worth a Node update of its own
    assert sorted(json.loads(annotation(cluster, "node-a"))["pods"]) == sorted(
        ["uid-of-a-deleted-pod", pending["metadata"]["uid"]])
    assert cluster.api.calls.count(("patch", "Node", "node-a")) == 0

    cluster.api.delete("Pod", pending["metadata"]["name"])
    cluster.controller.reconcile()
    assert annotation(cluster, "node-a") is None
    assert cluster.api.calls.count(("patch", "Node", "node-a")) == 1


def test_pods_placed_on_several_in_flight_nodes_are_written_concurrently():
    cluster = Cluster()
    names = ["node-a", "node-b", "node-c"]
    for name in names:
        nominated_node(cluster, name, [])
    pods = {name: cluster.pending_pod(name=f"pod-for-{name}") for name in names}
    cluster.state.resync()
    snapshot = cluster.state.snapshot()
    gated = GatedPatches(cluster.api)
    placements = [(name, list(read_pods(snapshot, [pods[name]]).pods)) for name in names]

    written = []
    writer = threading.Thread(target=lambda: written.extend(
        cluster.controller.provisioner.nominations.add_all(placements, snapshot, cluster.clock.now() + 600)))
    writer.start()
    assert gated.wait_for(len(names))  # every node's patch is in flight at once
    assert written == []  # add_all waits for its writes
    gated.release()
    writer.join(30)

    assert [node["metadata"]["name"] for node in written] == names
    for name in names:
        assert sorted(json.loads(annotation(cluster, name))["pods"]) == [pods[name]["metadata"]["uid"]]
        assert cluster.controller.ledger.covers(pods[name]["metadata"]["uid"])
