import threading

import pytest

from provisioner.clock import FakeClock
from provisioner.kube.api import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    TooManyRequestsError,
)
from provisioner.kube.fake import FakeKubeAPI, merge_patch, scaled_value
from provisioner.kube.selectors import parse_selector, selector_matches


def running_pod(name, labels, namespace="web", ready=True):
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def api(clock):
    return FakeKubeAPI(clock)


def test_create_fills_server_fields_and_rejects_duplicates(api, clock):
    clock.advance(42)
    obj = api.create("Pod", {"metadata": {"generateName": "inflate-"}, "spec": {}})
    meta = obj["metadata"]
    assert meta["name"].startswith("inflate-") and len(meta["name"]) == len("inflate-") + 5
    assert meta["namespace"] == "default"
    assert meta["creationTimestamp"] == "2026-01-01T00:00:42Z"
    assert obj["apiVersion"] == "v1" and obj["kind"] == "Pod"
    assert int(meta["resourceVersion"]) == 1
    with pytest.raises(AlreadyExistsError):
        api.create("Pod", {"metadata": {"name": meta["name"]}})
    with pytest.raises(ApiError) as err:
        api.create("Pod", {"metadata": {}})
    assert err.value.status == 422


def test_get_returns_copies(api):
    api.create("Node", {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    got = api.get("Node", "n1")
    got["metadata"]["labels"]["a"] = "changed"
    assert api.get("Node", "n1")["metadata"]["labels"] == {"a": "1"}
    with pytest.raises(NotFoundError):
        api.get("Node", "missing")


def test_list_filters_by_namespace_and_label_selector(api):
    for ns, name, labels in [("a", "p1", {"app": "x"}), ("a", "p2", {"app": "y"}), ("b", "p3", {"app": "x"})]:
        api.create("Pod", {"metadata": {"name": name, "namespace": ns, "labels": labels}})
    items, rv = api.list("Pod", label_selector="app=x")
    assert [i["metadata"]["name"] for i in items] == ["p1", "p3"]
    assert rv == "3"
    items, _ = api.list("Pod", namespace="a", label_selector="app notin (x)")
    assert [i["metadata"]["name"] for i in items] == ["p2"]
    with pytest.raises(ApiError) as err:
        api.list("Pod", label_selector="app in (x")
    assert err.value.status == 400


def test_merge_patch_and_json_patch(api):
    api.create("Node", {"metadata": {"name": "n1", "labels": {"a": "1", "b": "2"}}, "spec": {}})
    out = api.patch("Node", "n1", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    out = api.patch(
        "Node", "n1", [{"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}]
    )
    assert out["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert out["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as err:
        api.patch("Node", "n1", [{"op": "test", "path": "/spec/unschedulable", "value": True}])
    assert err.value.status == 422
    with pytest.raises(NotFoundError):
        api.patch("Node", "nope", {"metadata": {}})


def test_noop_patch_keeps_resource_version(api):
    created = api.create("Node", {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    out = api.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    assert out["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_subresource_split(api):
    api.create("Node", {"metadata": {"name": "n1"}, "spec": {}, "status": {"phase": "x"}})
    out = api.patch("Node", "n1", {"spec": {"unschedulable": True}, "status": {"phase": "ignored"}})
    assert out["status"] == {"phase": "x"} and out["spec"]["unschedulable"] is True
    out = api.patch(
        "Node", "n1", {"spec": {"unschedulable": False}, "status": {"phase": "y"}}, subresource="status"
    )
    assert out["status"] == {"phase": "y"} and out["spec"]["unschedulable"] is True


def test_replace_detects_conflicts(api):
    created = api.create("Provisioner", {"metadata": {"name": "default"}, "spec": {"limits": {}}})
    created["spec"]["ttlSecondsAfterEmpty"] = 30
    updated = api.replace("Provisioner", created)
    assert updated["spec"]["ttlSecondsAfterEmpty"] == 30
    created["spec"]["ttlSecondsAfterEmpty"] = 60  # stale resourceVersion
    with pytest.raises(ConflictError):
        api.replace("Provisioner", created)


def test_merge_patch_with_a_stale_resource_version_conflicts(api):
    created = api.create("Node", {"metadata": {"name": "n1"}})
    stale = created["metadata"]["resourceVersion"]
    fresh = api.patch("Node", "n1", {"metadata": {"resourceVersion": stale, "labels": {"a": "1"}}})
    assert fresh["metadata"]["labels"] == {"a": "1"}
    with pytest.raises(ConflictError, match="the object has been modified"):
        api.patch("Node", "n1", {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})
    assert api.get("Node", "n1")["metadata"]["labels"] == {"a": "1"}
    # without a resourceVersion a merge patch is unconditional, as on kube-apiserver
    assert api.patch("Node", "n1", {"metadata": {"labels": {"a": "3"}}})["metadata"]["labels"] == {"a": "3"}


def test_delete_honours_finalizers(api, clock):
    api.create("Node", {"metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}})
    clock.advance(10)
    api.delete("Node", "n1")
    node = api.get("Node", "n1")
    assert node["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:10Z"
    # finalizers can be removed; the other metadata cannot be rewritten
    api.patch("Node", "n1", {"metadata": {"finalizers": None, "deletionTimestamp": None}})
    with pytest.raises(NotFoundError):
        api.get("Node", "n1")


def test_pod_grace_period_reaped_by_clock(clock):
    api = FakeKubeAPI(clock, pod_grace_seconds=30)
    api.create("Pod", {"metadata": {"name": "p", "namespace": "d"}, "spec": {}})
    api.delete("Pod", "p", "d")
    assert api.get("Pod", "p", "d")["metadata"]["deletionGracePeriodSeconds"] == 30
    clock.advance(31)
    with pytest.raises(NotFoundError):
        api.get("Pod", "p", "d")


def test_watch_replays_from_resource_version_and_gone_after_compaction(api):
    api.create("Node", {"metadata": {"name": "n1"}})
    _, rv = api.list("Node")
    api.create("Node", {"metadata": {"name": "n2"}})
    api.create("Pod", {"metadata": {"name": "p"}})
    api.delete("Node", "n1")
    events = list(api.watch("Node", rv, timeout_seconds=0))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "n2"), ("DELETED", "n1")]
    initial = list(api.watch("Node", "0", timeout_seconds=0))
    assert [(e.type, e.object["metadata"]["name"]) for e in initial] == [("ADDED", "n2")]
    api.compact()
    with pytest.raises(GoneError):
        list(api.watch("Node", rv, timeout_seconds=0))


def test_watch_blocks_until_a_change(api):
    _, rv = api.list("Node")
    got = []

    def consume():
        for event in api.watch("Node", rv, timeout_seconds=5):
            got.append(event.object["metadata"]["name"])
            return

    t = threading.Thread(target=consume)
    t.start()
    api.create("Node", {"metadata": {"name": "late"}})
    t.join(5)
    assert got == ["late"]


def test_subscribe_and_unsubscribe(api):
    seen = []
    unsubscribe = api.subscribe(lambda kind, e: seen.append((kind, e.type)))
    api.create("Node", {"metadata": {"name": "n1"}})
    unsubscribe()
    api.delete("Node", "n1")
    assert seen == [("Node", "ADDED")]


def test_bind_and_kubelet_helpers(api):
    api.create(
        "Pod", {"metadata": {"name": "p", "namespace": "d"}, "spec": {}, "status": {"phase": "Pending"}}
    )
    api.create("Node", {"metadata": {"name": "n1"}})
    bound = api.bind("p", "d", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][0].items()
    with pytest.raises(ConflictError):
        api.bind("p", "d", "n2")
    running = api.set_pod_running("p", "d")
    assert running["status"]["phase"] == "Running"
    node = api.set_node_ready("n1")
    assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]


def test_eviction_respects_min_available(api):
    for i in range(3):
        api.create("Pod", running_pod(f"p{i}", {"app": "web"}))
    api.create(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "pdb", "namespace": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    assert api.pdb_status("pdb", "web")["disruptionsAllowed"] == 1
    api.evict("p0", "web")
    with pytest.raises(NotFoundError):
        api.get("Pod", "p0", "web")
    with pytest.raises(TooManyRequestsError) as err:
        api.evict("p1", "web")
    assert err.value.status == 429
    assert "needs 2 healthy pods and has 2" in err.value.message


def test_eviction_with_replicaset_replacement_never_drops_below_budget(api):
    """A ReplicaSet played via on_pod_deleted: replacements start unready, so evictions wait."""
    for i in range(3):
        api.create("Pod", running_pod(f"p{i}", {"app": "web"}))
    api.create(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "pdb", "namespace": "web"},
            "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    api.set_expected_pods("web", "pdb", 3)
    counter = iter(range(100))
    api.on_pod_deleted(
        lambda pod: api.create("Pod", running_pod(f"r{next(counter)}", {"app": "web"}, ready=False))
    )
    # maxUnavailable 34% of 3 rounds up to 2: one healthy pod may go... then another
    assert api.pdb_status("pdb", "web")["desiredHealthy"] == 1
    api.evict("p0", "web")
    api.evict("p1", "web")
    with pytest.raises(TooManyRequestsError):
        api.evict("p2", "web")
    # the unready replacement can be evicted while the budget is healthy (IfHealthyBudget)
    api.evict("r0", "web")
    assert sum(1 for p in api.list("Pod", "web")[0] if p["metadata"]["name"].startswith("r")) == 2


def test_eviction_skips_budgets_for_pending_pods_and_rejects_two_budgets(api):
    api.create(
        "Pod",
        {
            "metadata": {"name": "pending", "namespace": "web", "labels": {"app": "web"}},
            "status": {"phase": "Pending"},
        },
    )
    api.create("Pod", running_pod("run", {"app": "web"}))
    for name in ("a", "b"):
        api.create(
            "PodDisruptionBudget",
            {"metadata": {"name": name, "namespace": "web"}, "spec": {"minAvailable": 0, "selector": {}}},
        )
    api.evict("pending", "web")
    with pytest.raises(ApiError) as err:
        api.evict("run", "web")
    assert err.value.status == 500


def test_fail_next_injects_errors(api):
    api.fail_next[("create", "Node")] = [ApiError(500, "InternalError", "boom")]
    with pytest.raises(ApiError):
        api.create("Node", {"metadata": {"name": "n1"}})
    api.create("Node", {"metadata": {"name": "n1"}})
    assert ("create", "Node", "n1") in api.calls


def test_merge_patch_rfc7386_examples():
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}


def test_scaled_value():
    assert scaled_value(2, 10, round_up=True) == 2
    assert scaled_value("25%", 10, round_up=True) == 3
    assert scaled_value("25%", 10, round_up=False) == 2
    with pytest.raises(ValueError):
        scaled_value("abc", 10, round_up=True)


def test_selectors():
    match = parse_selector("app=web,tier!=db,env in (prod, stage),!legacy,zone")
    assert match({"app": "web", "env": "prod", "zone": "a"})
    assert not match({"app": "web", "env": "dev", "zone": "a"})
    assert not match({"app": "web", "env": "prod", "zone": "a", "legacy": ""})
    assert not match({"app": "web", "env": "prod", "zone": "a", "tier": "db"})
    with pytest.raises(ValueError):
        parse_selector("a in (b")({})
    assert selector_matches({}, {"x": "y"})
    assert not selector_matches(None, {"x": "y"})
    sel = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
    }
    assert selector_matches(sel, {"app": "web"})
    assert not selector_matches(sel, {"app": "web", "tier": "db"})
    assert not selector_matches({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, {"a": "1"})
