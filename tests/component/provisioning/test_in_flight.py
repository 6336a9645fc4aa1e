"""Pods whose capacity is on its way are covered: a later batch launches nothing for them.

The e2e burst (200 pods, ~64 slow launches) showed a second batch launching again for pods
of the first: the round's snapshot was taken just before the watch delivered the first
round's Nodes, and the controller forgot its launches on those events. These tests rebuild
that interleaving deterministically: the cache lags the API (it is pumped by hand), launches
block on an Event, and the cache catches up right after the second round's snapshot.
"""

import json
import threading

from provisioner.model import labels as wk

from .harness import Cluster

WAIT = 10.0  # real seconds a thread may take to reach a point (never reached when things work)


class BlockingCreates:
    """Wraps ``cloud.create``: each call waits for ``release``; ``wait_for(n)`` until n calls are blocked."""

    def __init__(self, cloud):
        self.release = threading.Event()
        self.blocked = 0
        self._cond = threading.Condition()
        self._create = cloud.create
        cloud.create = self

    def __call__(self, request):
        with self._cond:
            self.blocked += 1
            self._cond.notify_all()
        assert self.release.wait(WAIT), "launch never released"
        return self._create(request)

    def wait_for(self, n):
        with self._cond:
            assert self._cond.wait_for(lambda: self.blocked >= n, WAIT), (self.blocked, n)


def catch_up_after_snapshot(cluster):
    """From now on, the cache receives the pending watch events right after each snapshot."""
    real = cluster.state.snapshot

    def snapshot():
        snap = real()
        cluster.state.pump()
        return snap

    cluster.state.snapshot = snapshot


def nominations(cluster):
    """pod uid -> the node names whose nominations annotation holds it."""
    found = {}
    for node in cluster.nodes():
        raw = node["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
        for uid in json.loads(raw)["pods"] if raw else ():
            found.setdefault(uid, []).append(node["metadata"]["name"])
    return found


def run(target, results):
    thread = threading.Thread(target=lambda: results.append(target()), daemon=True)
    thread.start()
    return thread


def test_a_second_batch_launches_nothing_for_pods_being_launched():
    cluster = Cluster()
    cluster.stop_following()
    creates = BlockingCreates(cluster.cloud)
    pods = [cluster.pending_pod(cpu="1") for _ in range(12)]  # 3 per r6gd.xlarge: 4 nodes
    cluster.state.pump()
    cluster.clock.advance(1.0)  # the first window closes

    first, second = [], []
    batch1 = cluster.controller.batcher.take()
    assert batch1 is not None
    round1 = run(lambda: cluster.controller.reconcile(batch1), first)
    creates.wait_for(4)  # the 4 launches are in flight

    # meanwhile kube-scheduler marks the pods Unschedulable again and the extender signals
    for pod in pods:
        cluster.api.patch(
            "Pod", pod["metadata"]["name"], {"metadata": {"labels": {"retried": "yes"}}}, "default"
        )
    cluster.state.pump()
    cluster.controller.trigger(None)
    cluster.clock.advance(1.0)  # a second window closes while the first round's launches run
    batch = cluster.controller.batcher.take()
    assert batch is not None and batch.triggered
    # the Nodes of the first round reach the cache just after the second round's snapshot
    catch_up_after_snapshot(cluster)
    round2 = run(lambda: cluster.controller.reconcile(batch), second)

    creates.release.set()
    round1.join(WAIT)
    round2.join(WAIT)
    assert not round1.is_alive() and not round2.is_alive()

    (result1,) = first
    (result2,) = second
    assert len(result1.nodes) == 4 and len(cluster.cloud.create_calls) == 4
    assert result2.nodes == () and result2.nominated_existing == {}
    assert len(cluster.nodes()) == 4
    covered = nominations(cluster)
    assert sorted(covered) == sorted(p["metadata"]["uid"] for p in pods)
    assert all(len(names) == 1 for names in covered.values()), covered

    # once the cache shows everything, the memory is released and still nothing is launched
    cluster.state.pump()
    third = cluster.controller.reconcile()
    assert third.pods == 0 and len(cluster.cloud.create_calls) == 4
    assert cluster.controller.ledger.in_flight() == {} and cluster.controller.ledger.written() == {}


def test_pods_do_not_open_a_window_while_their_launch_runs():
    cluster = Cluster()
    cluster.stop_following()
    creates = BlockingCreates(cluster.cloud)
    pods = [cluster.pending_pod(cpu="1") for _ in range(3)]
    cluster.state.pump()
    cluster.clock.advance(1.0)
    first = []
    batch1 = cluster.controller.batcher.take()
    assert batch1 is not None
    round1 = run(lambda: cluster.controller.reconcile(batch1), first)
    creates.wait_for(1)
    for pod in pods:  # pod updates while the launch for them runs
        cluster.api.patch("Pod", pod["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}}, "default")
    cluster.state.pump()
    assert not cluster.controller.batcher.is_open()
    creates.release.set()
    round1.join(WAIT)
    assert len(first[0].nodes) == 1


def test_a_failed_launch_leaves_its_pods_provisionable():
    cluster = Cluster()
    from provisioner.cloudprovider.types import LaunchError

    cluster.cloud.next_error = LaunchError("boom")
    pod = cluster.pending_pod(cpu="1")
    result = cluster.controller.reconcile()
    assert result.nodes == () and "default/" + pod["metadata"]["name"] in result.failed
    assert cluster.controller.ledger.in_flight() == {}
    cluster.clock.advance(cluster.controller.settings.backoff_base_seconds + 1)
    again = cluster.controller.reconcile()
    assert len(again.nodes) == 1


def test_pods_nominated_to_an_in_flight_node_stay_covered_while_the_cache_lags_the_patch():
    cluster = Cluster()
    first = cluster.pending_pod(cpu="1")
    cluster.controller.reconcile()
    (node,) = cluster.nodes()
    name = node["metadata"]["name"]

    cluster.stop_following()
    late = [cluster.pending_pod(cpu="1") for _ in range(2)]  # they fill the node: 3 x 1000m of 3820m
    cluster.state.pump()
    second = cluster.controller.reconcile()
    assert sorted(second.nominated_existing[name]) == sorted(p["metadata"]["uid"] for p in late)
    # the cache still shows the node without the new nominations; one more 1-cpu pod arrives
    cluster.controller.trigger(None)
    newest = cluster.pending_pod(cpu="1")
    pod_events = cluster.api.watch("Pod", cluster.state.resource_version("Pod"), timeout_seconds=0)
    for event in pod_events:
        cluster.state.handle("Pod", event)
    assert wk.NOMINATIONS_ANNOTATION in cluster.state.get("Node", name)["metadata"]["annotations"]
    assert len(json.loads(
        cluster.state.get("Node", name)["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION]
    )["pods"]) == 1
    third = cluster.controller.reconcile()
    # the full node takes nothing more; the newest pod gets a node of its own, the others none
    assert third.nominated_existing == {} and third.pods == 1
    assert len(third.nodes) == 1 and third.launched[0].pod_uids == (newest["metadata"]["uid"],)
    covered = nominations(cluster)
    assert covered[first["metadata"]["uid"]] == [name]
    assert all(covered[p["metadata"]["uid"]] == [name] for p in late)


def test_an_in_flight_node_with_the_cloud_provider_uninitialized_taint_still_takes_pods():
    """``node.cloudprovider.kubernetes.io/uninitialized`` lasts until the cloud controller initialises the node.

    Like ``karpenter.sh/not-ready`` it is hidden on a launching node, so a pod that does not
    tolerate it is nominated to the in-flight node instead of launching a second node.
    """
    cluster = Cluster()
    for _ in range(3):
        cluster.pending_pod()
    cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 1
    node = cluster.nodes()[0]
    name = node["metadata"]["name"]
    uninitialized = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
    cluster.api.patch("Node", name, {"spec": {"taints": [*node["spec"]["taints"], uninitialized]}})
    assert uninitialized in cluster.state.snapshot().nodes[name]["spec"]["taints"]

    given = []
    solve = cluster.controller.provisioner.solver

    def recording(solver_input):
        given.append(solver_input)
        return solve(solver_input)

    cluster.controller.provisioner.solver = recording
    late = cluster.pending_pod(cpu="400m")
    assert not late["spec"].get("tolerations")
    result = cluster.controller.reconcile()
    # the solver is handed the node as it will be once initialised: no taint left to tolerate
    (in_flight,) = given[0].nodes
    assert (in_flight.name, in_flight.in_flight, in_flight.taints) == (name, True, ())
    assert len(cluster.cloud.create_calls) == 1
    assert result.nodes == ()
    assert result.nominated_existing == {name: (late["metadata"]["uid"],)}
    annotation = json.loads(cluster.api.get("Node", name)["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION])
    assert sorted(annotation["pods"]) == sorted(
        p["metadata"]["uid"] for p in cluster.api.list("Pod")[0]
    )
