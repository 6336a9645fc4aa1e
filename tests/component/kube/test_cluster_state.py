
import pytest

from provisioner.clock import FakeClock
from provisioner.kube.api import WatchEvent
from provisioner.kube.fake import FakeKubeAPI
from provisioner.state import ClusterState
from tests.builders.expectations import eventually
from tests.builders.walkthrough import walkthrough


def pod(name, node=None, phase="Pending", namespace="default"):
    obj = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }
    if node:
        obj["spec"]["nodeName"] = node
    return obj


@pytest.fixture
def api():
    return FakeKubeAPI(FakeClock())


def test_resync_indexes_pods_and_decodes_provisioners(api):
    api.create("Provisioner", walkthrough("01-provisioner.yaml"))
    api.create("Node", {"metadata": {"name": "n1"}})
    a = api.create("Pod", pod("a", node="n1", phase="Running"))
    b = api.create("Pod", pod("b"))
    api.create("Pod", pod("done", node="n1", phase="Succeeded"))
    state = ClusterState(api, api.clock)
    assert not state.synced()
    state.resync()
    assert state.synced()
    snap = state.snapshot()
    assert list(snap.nodes) == ["n1"]
    assert [p["metadata"]["name"] for p in snap.pods_on("n1")] == ["a"]
    assert [p["metadata"]["name"] for p in snap.pending_pods] == ["b"]
    assert snap.bound_pod_uids == frozenset({a["metadata"]["uid"], api.get("Pod", "done")["metadata"]["uid"]})
    assert b["metadata"]["uid"] in snap.pods
    prov = snap.provisioners["default"]
    assert prov.name == "default"
    assert snap.provisioner_objects["default"]["metadata"]["uid"]
    assert snap.resource_versions["Pod"] == api.resource_version


def test_changes_flow_through_subscription_and_snapshots_stay_consistent(api):
    state = ClusterState(api, api.clock)
    state.resync()
    api.subscribe(state.handle)
    seen = []
    state.subscribe(lambda kind, e: seen.append((kind, e.type, e.object["metadata"]["name"])))
    api.create("Node", {"metadata": {"name": "n1"}})
    api.create("Pod", pod("p"))
    before = state.snapshot()
    api.bind("p", "default", "n1")
    after = state.snapshot()
    assert [p["metadata"]["name"] for p in before.pending_pods] == ["p"]
    assert before.pods_on("n1") == ()
    assert after.pending_pods == ()
    assert [p["metadata"]["name"] for p in after.pods_on("n1")] == ["p"]
    api.delete("Pod", "p")
    assert state.snapshot().pods_on("n1") == ()
    assert seen == [
        ("Node", "ADDED", "n1"),
        ("Pod", "ADDED", "p"),
        ("Pod", "MODIFIED", "p"),
        ("Pod", "DELETED", "p"),
    ]


def test_pump_relists_after_gone_and_announces_missed_deletions(api):
    api.create("Node", {"metadata": {"name": "keep"}})
    api.create("Node", {"metadata": {"name": "gone"}})
    state = ClusterState(api, api.clock, kinds=("Node",))
    state.resync()
    api.create("Node", {"metadata": {"name": "new"}})
    assert state.pump() == 1
    assert sorted(state.snapshot().nodes) == ["gone", "keep", "new"]
    seen = []
    state.subscribe(lambda kind, e: seen.append((e.type, e.object["metadata"]["name"])))
    api.delete("Node", "gone")
    api.compact()  # the watch's resourceVersion is now too old: 410, relist
    state.pump()
    assert sorted(state.snapshot().nodes) == ["keep", "new"]
    assert seen == [("DELETED", "gone")]


def test_odd_objects_never_crash(api, caplog):
    state = ClusterState(api, api.clock)
    state.resync()
    api.subscribe(state.handle)
    api.create(
        "Provisioner", {"metadata": {"name": "bad"}, "spec": {"ttlSecondsAfterEmpty": "soon", "bogus": 1}}
    )
    snap = state.snapshot()
    assert "bad" not in snap.provisioners
    assert "ttlSecondsAfterEmpty" in snap.provisioner_errors["bad"]
    assert "Ignoring Provisioner bad" in caplog.text
    state.handle("Pod", WatchEvent("ADDED", {"no": "metadata"}))
    state.handle("Widget", WatchEvent("ADDED", {"metadata": {"name": "x"}}))
    state.handle("Node", WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "999"}}))
    assert state.resource_version("Node") == "999"
    # a corrected object replaces the error
    api.replace("Provisioner", {"metadata": {"name": "bad"}, "spec": {"ttlSecondsAfterEmpty": 30}})
    assert "bad" in state.snapshot().provisioners and "bad" not in state.snapshot().provisioner_errors


def test_failing_subscriber_does_not_stop_updates(api):
    state = ClusterState(api, api.clock, kinds=("Node",))
    state.resync()
    api.subscribe(state.handle)

    def boom(kind, event):
        raise RuntimeError("subscriber bug")

    state.subscribe(boom)
    api.create("Node", {"metadata": {"name": "n1"}})
    assert "n1" in state.snapshot().nodes


def test_informer_threads_follow_the_api(api):
    state = ClusterState(api, api.clock, kinds=("Node", "Pod"), watch_timeout_seconds=1)
    state.start()
    try:
        assert state.wait_synced(5)
        api.create("Node", {"metadata": {"name": "n1"}})
        assert eventually(lambda: "n1" in state.snapshot().nodes)
        api.compact()
        api.create("Node", {"metadata": {"name": "n2"}})
        assert eventually(lambda: "n2" in state.snapshot().nodes)
        assert sorted(state.snapshot().nodes) == ["n1", "n2"]
    finally:
        api.close()
        state.stop()
