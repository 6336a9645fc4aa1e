"""The extender over the cluster state cache (FakeKubeAPI -> ClusterState -> LiveState -> flask app)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from extender.app import create_app_for_cluster
from extender.live import LiveState
from provisioner import metrics
from provisioner.clock import FakeClock
from provisioner.kube.fake import FakeKubeAPI
from provisioner.state import ClusterState
from tests.builders.expectations import eventually
from tests.fixtures.extender import body, cluster, now
from tests.fixtures.extender.build_fixtures import N1, N2, N3, N6, N7, NOMINATED, UNKNOWN

KINDS = ("Provisioner", "Node", "Pod")


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """What a client may create: no uid/resourceVersion/creationTimestamp/deletionTimestamp."""
    obj = copy.deepcopy(obj)
    for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        obj["metadata"].pop(field, None)
    return obj


@pytest.fixture
def loaded() -> tuple[FakeKubeAPI, ClusterState]:
    clock = FakeClock(now())
    api = FakeKubeAPI(clock)
    data = cluster()
    for provisioner in data["provisioners"]:
        api.create("Provisioner", strip(provisioner))
    for node in data["nodes"]:
        created = api.create("Node", strip(node))
        if node["metadata"].get("deletionTimestamp"):  # finalizer keeps it, with a deletionTimestamp
            api.delete("Node", created["metadata"]["name"])
    for pod in data["pods"]:
        api.create("Pod", strip(pod))
    state = ClusterState(api, clock, kinds=KINDS)
    api.subscribe(state.handle)
    return api, state


def post(client: Any, verb: str, request: dict[str, Any]) -> Any:
    response = client.post(f"/{verb}", data=json.dumps(request), content_type="application/json")
    assert response.status_code == 200, response.data
    return response.get_json()


def test_filter_answers_from_the_cache(loaded: tuple[FakeKubeAPI, ClusterState]) -> None:
    api, state = loaded
    app = create_app_for_cluster(state, clock=FakeClock(now()))
    live: LiveState = app.extensions["groupless_live_state"]
    client = app.test_client()
    assert client.get("/readyz").status_code == 503  # not synced yet
    assert client.get("/healthz").status_code == 200
    state.resync()
    live.refresh()
    assert client.get("/readyz").status_code == 200
    answer = post(client, "filter", body("filter-nodenames"))
    # the fake API assigns its own UIDs, so the nominations name pods it does not know: those
    # count as deleted and N2 is not reserved; everything else as in the unit tests
    assert answer["NodeNames"] == [N1, N2, N6, N7, UNKNOWN]
    assert N3 in answer["FailedAndUnresolvableNodes"]
    live.stop()


def test_nomination_written_by_the_controller_reserves_the_node(loaded: tuple[FakeKubeAPI, ClusterState]) -> None:
    api, state = loaded
    state.resync()
    live = LiveState(state)
    live.refresh()
    uids = [api.get("Pod", name, "default")["metadata"]["uid"] for name in NOMINATED]
    annotation = json.dumps({"deadline": "2026-01-01T00:05:00Z", "pods": {
        uid: {"pod": f"default/{name}", "requests": {"cpu": 1000}} for uid, name in zip(uids, NOMINATED, strict=True)}})
    api.patch("Node", N2, {"metadata": {"annotations": {"groupless.dev/nominations": annotation}}})
    app = create_app_for_cluster(state, clock=FakeClock(now()))
    app.extensions["groupless_live_state"].refresh()
    answer = post(app.test_client(), "filter", body("filter-nodenames"))
    app.extensions["groupless_live_state"].stop()
    assert answer["FailedNodes"] == {N2: "node is reserved for nominated pods"}
    # one nominated pod binds elsewhere: the reservation shrinks and the late pod fits again
    bound = copy.deepcopy(api.get("Pod", list(NOMINATED)[0], "default"))
    bound["spec"]["nodeName"] = N1
    api.replace("Pod", bound)
    app.extensions["groupless_live_state"].refresh()
    assert N2 in post(app.test_client(), "filter", body("filter-nodenames"))["NodeNames"]
    app.extensions["groupless_live_state"].stop()


def test_the_extender_and_the_metrics_share_the_caches_node_views(loaded: tuple[FakeKubeAPI, ClusterState]) -> None:
    api, state = loaded
    state.resync()
    assert len(state.node_views) == 0
    untrack = metrics.track_cluster_state(state)
    try:
        metrics.exposition()  # the scrape reads the nodes through the cache's views
        assert len(state.node_views) == len(state.snapshot().nodes)
    finally:
        untrack()
        metrics.update_cluster_gauges([], [])
    before = state.node_views.nodes(state.snapshot())
    live = LiveState(state)
    assert live.node_views is state.node_views
    live.refresh()
    after = state.node_views.nodes(state.snapshot())
    assert all(after[name] is view for name, view in before.items())  # nothing was decoded twice
    assert LiveState(state, price_of=lambda *_: 1.0).node_views is not state.node_views
    live.stop()


def test_background_rebuild_follows_changes(loaded: tuple[FakeKubeAPI, ClusterState]) -> None:
    api, state = loaded
    state.resync()
    live = LiveState(state, min_interval=0.01)
    try:
        live.ensure_started()
        assert eventually(live.ready, timeout=10)
        assert live().nodes[N1].mark is None
        api.patch("Node", N1, {"spec": {"unschedulable": True}})  # the watch event reaches the cache
        assert eventually(lambda: live().nodes[N1].mark is not None, timeout=10)
        assert live().nodes[N1].mark == "cordoned"
    finally:
        live.stop()
    assert live._thread is not None and not live._thread.is_alive()


@pytest.mark.parametrize("finalizer", [False, True], ids=["deleted", "being-deleted"])
def test_nodes_of_a_deleted_provisioner_are_rejected(loaded: tuple[FakeKubeAPI, ClusterState], finalizer: bool) -> None:
    """kubectl delete provisioner, then a bare pod: it must not bind to a node about to be deleted."""
    api, state = loaded
    state.resync()
    live = LiveState(state)
    live.refresh()
    team_a = [n for n, i in live().nodes.items() if i.provisioner == "team-a"]
    request = body("filter-nodenames")
    request["NodeNames"] = [*request["NodeNames"], *team_a]
    before = post_filter(live, request)["FailedAndUnresolvableNodes"]
    assert team_a and all(before.get(n) != "node's Provisioner is deleted or being deleted" for n in team_a)
    if finalizer:
        api.patch("Provisioner", "team-a", {"metadata": {"finalizers": ["example.com/hold"]}})
    api.delete("Provisioner", "team-a")
    remaining = {p["metadata"]["name"]: p for p in api.list("Provisioner")[0]}
    assert ("team-a" in remaining) == finalizer
    assert not finalizer or remaining["team-a"]["metadata"].get("deletionTimestamp")
    live.refresh()
    answer = post_filter(live, request)
    for name in team_a:
        assert answer["FailedAndUnresolvableNodes"][name] == "node's Provisioner is deleted or being deleted"
        assert name not in answer["NodeNames"] and name not in answer["FailedNodes"]
    assert N1 in answer["NodeNames"]  # nodes of the Provisioner that stays still pass
    live.stop()


def post_filter(live: LiveState, request: dict[str, Any]) -> Any:
    from extender import handlers

    return handlers.filter(request, live(), now())
