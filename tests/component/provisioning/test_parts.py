import threading
import time

import pytest

from provisioner.api.schemas import load_provisioner
from provisioner.clock import FakeClock, RealClock
from provisioner.controllers.provisioning import Batcher
from provisioner.controllers.provisioning.nodes import node_request_id, node_taints
from provisioner.model.pods import not_provisionable_reason
from provisioner.model.quantity import format_quantity
from provisioner.settings import Batching, ProvisioningSettings

from .harness import Cluster, walkthrough

UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
}


def pod(**over):
    obj = {
        "metadata": {"name": "p", "namespace": "d", "uid": "u1"},
        "spec": {},
        "status": dict(UNSCHEDULABLE),
    }
    for key, value in over.items():
        section, _, field = key.partition("__")
        obj[section][field] = value
    return obj


def test_selection_rules():
    assert not_provisionable_reason(pod()) is None
    assert not_provisionable_reason(pod(spec__nodeName="n")) == "bound"
    assert (
        not_provisionable_reason(pod(status__nominatedNodeName="n")) == "kube-scheduler is preempting for it"
    )
    assert (
        not_provisionable_reason(pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z")) == "being deleted"
    )
    ds = pod(metadata__ownerReferences=[{"kind": "DaemonSet", "name": "x", "controller": True}])
    assert not_provisionable_reason(ds) == "owned by a DaemonSet"
    static = pod(metadata__ownerReferences=[{"kind": "Node", "name": "n1", "controller": True}])
    assert not_provisionable_reason(static) == "owned by a Node"
    waiting = pod(
        status__conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}]
    )
    assert not_provisionable_reason(waiting) == "kube-scheduler has not marked it Unschedulable"
    assert (
        not_provisionable_reason(pod(status__conditions=[]))
        == "kube-scheduler has not marked it Unschedulable"
    )
    assert not_provisionable_reason(pod(), nominated_uids={"u1"}) == "nominated to an in-flight node"
    assert not_provisionable_reason(pod(status__phase="Failed")) == "terminal"
    assert not_provisionable_reason({"metadata": "odd"}) == "malformed pod"
    assert not_provisionable_reason("odd") == "not an object"


def test_batcher_idle_and_max_windows():
    clock = FakeClock()
    b = Batcher(clock, idle_seconds=1, max_seconds=10, max_items=2000)
    assert b.take() is None
    b.add("a")
    clock.advance(0.9)
    b.add("b")
    clock.advance(0.9)
    assert b.take() is None  # idle restarted by "b"
    b.add("b")  # a repeated pod does not extend the window
    clock.advance(0.1)
    batch = b.take()
    assert batch.uids == {"a", "b"} and batch.duration == pytest.approx(1.9, abs=1e-3)
    # a steady trickle is cut at the maximum
    for _ in range(20):
        b.add(f"p{clock.now()}")
        clock.advance(0.6)
        if b.ready():
            break
    batch = b.take()
    assert batch.duration == pytest.approx(10.2, abs=1e-3) and len(batch.uids) == 17


def test_batcher_size_limit_and_trigger():
    clock = FakeClock()
    b = Batcher(clock, idle_seconds=1, max_seconds=10, max_items=3)
    for uid in "abc":
        b.add(uid)
    assert b.ready() and b.take().uids == {"a", "b", "c"}
    b.add(None)
    assert not b.ready()
    clock.advance(1)
    batch = b.take()
    assert batch.triggered and batch.uids == frozenset()
    with pytest.raises(ValueError):
        Batcher(clock, idle_seconds=-1)


def test_batcher_wait_blocks_until_the_window_closes():
    b = Batcher(RealClock(), idle_seconds=0.05, max_seconds=1, max_items=10)
    stop = threading.Event()
    b.add("x")
    started = time.monotonic()
    batch = b.wait(stop, timeout=2)
    assert batch.uids == {"x"} and 0.04 <= time.monotonic() - started < 1
    assert b.wait(stop, timeout=0.05) is None


def test_quantities_in_kubelet_form():
    assert format_quantity("cpu", 4000) == "4"
    assert format_quantity("cpu", 3820) == "3820m"
    assert format_quantity("memory", 30310 * 1024**2) == "30310Mi"
    assert format_quantity("memory", 16 * 1024**3) == "16Gi"
    assert format_quantity("memory", 2048) == "2Ki"
    assert format_quantity("memory", 1000) == "1000"
    assert format_quantity("pods", 58) == "58"


def test_request_ids_are_stable():
    prov = load_provisioner(walkthrough("01-provisioner.yaml"))
    assert node_request_id(prov, ["b", "a"]) == node_request_id(prov, ["a", "b", "a"])
    assert node_request_id(prov, ["a"]) != node_request_id(prov, ["a"], attempt=1)
    assert node_request_id(prov, ["a"]) != node_request_id(prov, ["a"], salt="replace:n1")
    assert node_request_id(prov, ["a"]).startswith("nr-")


def test_node_taints_order_and_dedup():
    doc = walkthrough("01-provisioner.yaml")
    doc["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    doc["spec"]["startupTaints"] = [
        {"key": "cni-not-ready", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    ]
    prov = load_provisioner(doc)
    assert node_taints(prov) == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "cni-not-ready", "effect": "NoSchedule"},
        {"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},
    ]


def test_run_loop_launches_from_watch_events_and_triggers():
    settings = ProvisioningSettings(batching=Batching(idle_seconds=0.05, max_seconds=1), resync_seconds=5)
    cluster = Cluster(settings=settings)
    # the loop batches with real time: swap in a real-time batcher
    cluster.controller.batcher = Batcher(RealClock(), 0.05, 1, 2000)
    stop = threading.Event()
    thread = threading.Thread(target=cluster.controller.run, args=(stop,))
    thread.start()
    try:
        for _ in range(3):
            cluster.pending_pod()
        deadline = time.monotonic() + 5
        while not cluster.cloud.create_calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(cluster.cloud.create_calls) == 1
        cluster.controller.trigger(None)
        time.sleep(0.2)
        assert len(cluster.cloud.create_calls) == 1
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_full_nodes_are_left_out_unless_a_pod_counts_other_pods():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode
    from provisioner.scheduling.pods import pod_from_manifest
    from provisioner.state.solverinput import candidate_nodes

    full = ClusterNode(
        "full",
        allocatable=Resources({"cpu": 2000, "memory": 2**32, "pods": 10}),
        requested=Resources({"cpu": 1800, "pods": 3}),
    )
    roomy = ClusterNode("roomy", allocatable=Resources({"cpu": 2000, "memory": 2**32, "pods": 10}))
    deleting = ClusterNode(
        "deleting",
        allocatable=Resources({"cpu": 2000, "memory": 2**32, "pods": 10}),
        marked_for_deletion=True,
    )
    small = pod_from_manifest(
        {
            "metadata": {"name": "a", "uid": "a"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
        }
    )
    assert [n.name for n in candidate_nodes([full, roomy, deleting], [small])] == [
        "roomy"
    ]
    spread = pod_from_manifest(
        {
            "metadata": {"name": "b", "uid": "b", "labels": {"app": "x"}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    }
                ],
            },
        }
    )
    assert len(candidate_nodes([full, roomy, deleting], [small, spread])) == 3


def test_loop_wakes_when_a_backoff_ends():
    from provisioner.cloudprovider.types import LaunchError

    cluster = Cluster(settings=ProvisioningSettings(resync_seconds=30, backoff_base_seconds=5))
    assert cluster.controller._next_wake() == 30
    cluster.cloud.next_error = LaunchError("throttled")
    cluster.pending_pod()
    cluster.controller.reconcile()
    assert cluster.controller._next_wake() == 5
    cluster.clock.advance(4)
    assert cluster.controller._next_wake() == 1


def test_warm_up_fetches_the_instance_types_ahead(caplog):
    cluster = Cluster()
    with caplog.at_level("INFO"):
        cluster.controller.warm_up()
    assert [p.name for p in cluster.cloud.instance_types_calls] == ["default"]
    assert f"Fetched {len(cluster.cloud.instance_types)} instance types for Provisioner default in " in caplog.text


def test_the_running_loop_warms_each_new_provisioner_and_nothing_else_does():
    cluster = Cluster()
    other = walkthrough("01-provisioner.yaml")
    other["metadata"]["name"] = "other"
    cluster.api.create("Provisioner", other)  # not running: no fetch behind the test's back
    assert cluster.cloud.instance_types_calls == []

    fetched = {}
    real = cluster.cloud.get_instance_types

    def recording(provisioner):
        result = real(provisioner)
        fetched.setdefault(provisioner.name, threading.Event()).set()
        return result

    for name in ("default", "other", "late"):
        fetched[name] = threading.Event()
    cluster.cloud.get_instance_types = recording
    stop = threading.Event()
    thread = threading.Thread(target=cluster.controller.run, args=(stop,))
    thread.start()
    try:
        assert fetched["default"].wait(5) and fetched["other"].wait(5)  # warmed at start
        late = walkthrough("01-provisioner.yaml")
        late["metadata"]["name"] = "late"
        cluster.api.create("Provisioner", late)
        assert fetched["late"].wait(5)  # created while running: warmed too
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
