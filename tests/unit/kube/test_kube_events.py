from provisioner.clock import FakeClock
from provisioner.kube.api import ApiError
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI


def setup():
    clock = FakeClock()
    api = FakeKubeAPI(clock)
    return clock, api, EventRecorder(api, clock=clock, instance="ctl-0")


def test_event_shape_for_a_pod():
    clock, api, rec = setup()
    pod = api.create("Pod", {"metadata": {"name": "inflate-1", "namespace": "apps"}})
    rec.normal(pod, "Nominated", "Pod should schedule on node ip-1 (r6gd.xlarge, ap-south-1a)")
    (event,) = api.events()
    assert event["metadata"]["namespace"] == "apps"
    assert event["metadata"]["name"].startswith("inflate-1.")
    assert event["involvedObject"] == {
        "kind": "Pod",
        "name": "inflate-1",
        "namespace": "apps",
        "uid": pod["metadata"]["uid"],
        "apiVersion": "v1",
        "resourceVersion": pod["metadata"]["resourceVersion"],
    }
    assert (event["type"], event["reason"], event["count"]) == ("Normal", "Nominated", 1)
    assert event["source"] == {"component": "groupless"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("groupless", "ctl-0")
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"


def test_cluster_scoped_objects_go_to_default_namespace():
    _, api, rec = setup()
    prov = api.create("Provisioner", {"metadata": {"name": "default"}, "spec": {}})
    rec.warning(prov, "LaunchFailed", "boom")
    (event,) = api.events()
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]
    assert event["involvedObject"]["apiVersion"] == "karpenter.sh/v1alpha5"
    assert event["type"] == "Warning"


def test_identical_events_aggregate_within_window():
    clock, api, rec = setup()
    node = api.create("Node", {"metadata": {"name": "n1"}})
    rec.normal(node, "Launched", "x")
    clock.advance(30)
    rec.normal(node, "Launched", "x")
    rec.normal(node, "Launched", "different message")
    events = sorted(api.events(), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in events] == [("different message", 1), ("x", 2)]
    assert events[1]["lastTimestamp"] == "2026-01-01T00:00:30Z"
    clock.advance(601)
    rec.normal(node, "Launched", "x")
    assert len(api.events(reason="Launched")) == 3


def test_recording_never_raises():
    _, api, rec = setup()
    api.fail_next[("create", "Event")] = [ApiError(403, "Forbidden", "no")]
    rec.normal({"kind": "Node", "metadata": {"name": "n1"}}, "R", "m")
    rec.normal({"metadata": {}}, "R", "m")
    rec.normal("not an object", "R", "m")  # type: ignore[arg-type]
    assert api.events() == []


def test_asynchronous_mode_records_after_flush():
    clock = FakeClock()
    api = FakeKubeAPI(clock)
    rec = EventRecorder(api, clock=clock, asynchronous=True)
    rec.normal({"kind": "Node", "metadata": {"name": "n1"}}, "R", "m")
    rec.flush()
    assert [e["reason"] for e in api.events()] == ["R"]
