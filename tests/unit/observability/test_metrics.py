from __future__ import annotations

import re

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from provisioner import metrics
from provisioner.model import objects
from provisioner.state import Snapshot
from provisioner.state.nodes import NodeViews
from tests.builders.nodes import node_manifest


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_every_metric_is_named_under_groupless_with_bounded_labels() -> None:
    names = metrics.metric_names()
    assert len(names) == len(set(names)) == len(metrics.ALL_METRICS)
    for name in names:
        assert re.fullmatch(r"groupless_[a-z_]+", name), name
    forbidden = {"pod", "pod_name", "namespace", "uid", "message", "error"}
    for metric in metrics.ALL_METRICS:
        assert not forbidden & set(metric._labelnames), metric._name
        assert metric._documentation


def test_time_call_records_success_and_error_outcomes() -> None:
    before_ok = sample("groupless_cloudprovider_duration_seconds_count", method="create", outcome="success") or 0.0
    with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="create"):
        pass

    class InsufficientCapacityError(Exception):
        pass

    before_err = sample("groupless_cloudprovider_duration_seconds_count", method="create",
                        outcome="insufficient_capacity") or 0.0
    with pytest.raises(InsufficientCapacityError), metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="create"):
        raise InsufficientCapacityError("no r6gd.xlarge in ap-south-1a")
    assert sample("groupless_cloudprovider_duration_seconds_count", method="create", outcome="success") == before_ok + 1
    assert sample("groupless_cloudprovider_duration_seconds_count", method="create",
                  outcome="insufficient_capacity") == before_err + 1


def test_time_call_labels_set_inside_the_body_and_unlabelled_histograms() -> None:
    before = sample("groupless_extender_request_duration_seconds_count", verb="filter", code="400") or 0.0
    with metrics.time_call(metrics.EXTENDER_DURATION, verb="filter") as extra:
        extra["code"] = "400"
    assert sample("groupless_extender_request_duration_seconds_count", verb="filter", code="400") == before + 1
    solves = sample("groupless_provisioner_solve_duration_seconds_count") or 0.0
    with metrics.time_call(metrics.SOLVE_DURATION):
        pass
    assert sample("groupless_provisioner_solve_duration_seconds_count") == solves + 1
    # a fast body lands in the smallest bucket (1 ms)
    assert (sample("groupless_provisioner_solve_duration_seconds_bucket", le="0.001") or 0) >= 1


def test_outcome_of_snake_cases_error_classes() -> None:
    class NotFoundError(Exception):
        pass

    class EC2APIThrottled(Exception):
        pass

    assert metrics.outcome_of(None) == "success"
    assert metrics.outcome_of(NotFoundError()) == "not_found"
    assert metrics.outcome_of(EC2APIThrottled()) == "ec2_apithrottled"
    assert metrics.outcome_of(ValueError()) == "value"


def test_resource_gauges_convert_to_base_units_and_remove_node() -> None:
    metrics.set_resource_gauges(metrics.NODE_ALLOCATABLE, {"cpu": 3920, "memory": 29 * 2**30, "pods": 58},
                                node="ip-10-0-1-5", provisioner="default")
    assert sample("groupless_node_allocatable", node="ip-10-0-1-5", provisioner="default", resource="cpu") == 3.92
    assert sample("groupless_node_allocatable", node="ip-10-0-1-5", provisioner="default",
                  resource="memory") == float(29 * 2**30)
    assert sample("groupless_node_allocatable", node="ip-10-0-1-5", provisioner="default", resource="pods") == 58.0
    metrics.remove_node("ip-10-0-1-5", "default")
    assert sample("groupless_node_allocatable", node="ip-10-0-1-5", provisioner="default", resource="cpu") is None
    metrics.remove_node("ip-never-existed", "default")  # no error for unknown nodes


def test_buckets_span_one_millisecond_to_a_minute() -> None:
    assert metrics.DURATION_BUCKETS[0] == 0.001 and metrics.DURATION_BUCKETS[-1] == 60.0
    assert list(metrics.DURATION_BUCKETS) == sorted(metrics.DURATION_BUCKETS)
    assert metrics.BATCH_SIZE_BUCKETS[-1] == 2000


def test_exposition_lists_every_metric_family_after_use() -> None:
    metrics.BATCH_SIZE.observe(3)
    metrics.BATCH_DURATION.observe(1.05)
    metrics.NODES_LAUNCHED.labels(provisioner="default", capacity_type="on-demand", zone="ap-south-1a").inc()
    metrics.EVICTIONS.labels(outcome="pdb_blocked").inc()
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    for metric in metrics.ALL_METRICS:
        assert metric._name in families, metric._name
    launched = [s for s in families["groupless_nodes_launched"].samples if s.name.endswith("_total")]
    assert any(s.labels == {"provisioner": "default", "capacity_type": "on-demand", "zone": "ap-south-1a"}
               and s.value >= 1 for s in launched)


def test_metric_names_include_counter_total_suffix() -> None:
    names = metrics.metric_names()
    assert "groupless_evictions_total" in names
    assert "groupless_provisioner_batch_duration_seconds" in names
    assert set(metrics.EVICTION_OUTCOMES) == {"evicted", "pdb_blocked", "not_found", "error"}


def _pod(cpu: str, memory: str, phase: str = "Running") -> dict:
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": phase}}


def test_cluster_gauges_from_objects_and_stale_series_removed() -> None:
    provisioner = {"kind": "Provisioner", "metadata": {"name": "gauges"},
                   "spec": {"limits": {"resources": {"cpu": "8", "memory": "64Gi"}}},
                   "status": {"resources": {"cpu": "4", "memory": "30310Mi", "pods": "58"}}}
    nodes = [node_manifest("ip-1", provisioner="gauges", kind=True,
                           allocatable={"cpu": "3820m", "memory": "29217Mi", "pods": "58"}),
             node_manifest("unmanaged", allocatable={"cpu": "2"}, kind=True),
             {"kind": "Node", "metadata": None}]  # odd objects are skipped
    pods = {"ip-1": [_pod("1", "1Gi"), _pod("1", "1Gi"), _pod("500m", "512Mi"), _pod("4", "1Gi", phase="Succeeded"),
                     {"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}]}
    views = NodeViews().nodes(Snapshot(nodes={objects.name(n): n for n in nodes}, pods_by_node=pods))
    metrics.update_cluster_gauges(views.values(), [provisioner, {"metadata": {}}])
    assert sample("groupless_provisioner_usage", provisioner="gauges", resource="cpu") == 4.0
    assert sample("groupless_provisioner_usage", provisioner="gauges", resource="pods") == 58.0
    assert sample("groupless_provisioner_limit", provisioner="gauges", resource="memory") == float(64 * 2**30)
    assert sample("groupless_provisioner_usage_ratio", provisioner="gauges", resource="cpu") == 0.5
    assert sample("groupless_provisioner_usage_ratio", provisioner="gauges", resource="pods") is None  # not limited
    assert sample("groupless_node_allocatable", node="ip-1", provisioner="gauges", resource="cpu") == 3.82
    assert sample("groupless_node_requested", node="ip-1", provisioner="gauges", resource="cpu") == 2.5
    assert sample("groupless_node_requested", node="ip-1", provisioner="gauges", resource="memory") == float(2.5 * 2**30)
    # the pod whose requests cannot be read holds its pod slot (the node view's rule)
    assert sample("groupless_node_requested", node="ip-1", provisioner="gauges", resource="pods") == 4.0
    assert sample("groupless_node_allocatable", node="unmanaged", provisioner="", resource="cpu") is None
    # the node and the Provisioner go away: their series go too
    metrics.update_cluster_gauges([], [])
    assert sample("groupless_node_allocatable", node="ip-1", provisioner="gauges", resource="cpu") is None
    assert sample("groupless_provisioner_usage", provisioner="gauges", resource="cpu") is None


def test_zero_limit_ratio_is_infinite_when_anything_is_used() -> None:
    provisioner = {"metadata": {"name": "zero"}, "spec": {"limits": {"resources": {"cpu": "0", "memory": "0"}}},
                   "status": {"resources": {"cpu": "1"}}}
    metrics.update_cluster_gauges([], [provisioner])
    assert sample("groupless_provisioner_usage_ratio", provisioner="zero", resource="cpu") == float("inf")
    assert sample("groupless_provisioner_usage_ratio", provisioner="zero", resource="memory") == 0.0
    metrics.update_cluster_gauges([], [])


def test_scrape_hooks_run_before_exposition_and_failures_do_not_break_it() -> None:
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("cache gone")

    remove_ok = metrics.on_scrape(lambda: calls.append("ran"))
    remove_broken = metrics.on_scrape(broken)
    try:
        body, _ = metrics.exposition()
        assert calls == ["ran"] and b"groupless_evictions_total" in body
    finally:
        remove_ok()
        remove_broken()
    metrics.exposition()
    assert calls == ["ran"]


def test_track_cluster_state_refreshes_only_when_the_cache_moved() -> None:
    from dataclasses import replace
    from types import SimpleNamespace

    def node(cpu: str) -> dict:
        return node_manifest("ip-track", provisioner="track", allocatable={"cpu": cpu}, kind=True)

    snapshots = [Snapshot(nodes={"ip-track": node("2")}, resource_versions={"Node": "10"})]
    state = SimpleNamespace(snapshot=lambda: snapshots[-1])
    untrack = metrics.track_cluster_state(state)
    try:
        metrics.exposition()
        assert sample("groupless_node_allocatable", node="ip-track", provisioner="track", resource="cpu") == 2.0
        # the cache replaces a changed object (never mutates one); same resourceVersion: not re-read
        snapshots.append(replace(snapshots[-1], nodes={"ip-track": node("3")}))
        metrics.exposition()
        assert sample("groupless_node_allocatable", node="ip-track", provisioner="track", resource="cpu") == 2.0
        snapshots.append(replace(snapshots[-1], resource_versions={"Node": "11"}))
        metrics.exposition()
        assert sample("groupless_node_allocatable", node="ip-track", provisioner="track", resource="cpu") == 3.0
    finally:
        untrack()
        metrics.update_cluster_gauges([], [])
