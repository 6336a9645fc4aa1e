"""The wire accessors: exact values for ordinary objects, absent values (never errors) for odd ones."""

from __future__ import annotations

import pytest

from provisioner.model import objects
from provisioner.model.timestamps import parse_rfc3339, rfc3339, timestamp

POD = {
    "metadata": {
        "name": "web-0", "namespace": "team", "uid": "u-1", "resourceVersion": "42",
        "labels": {"app": "web"}, "annotations": {"a": "b"},
        "creationTimestamp": "2026-01-01T00:00:10Z", "deletionTimestamp": "2026-01-01T00:05:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-6cd", "controller": False},
                            {"kind": "StatefulSet", "name": "web", "controller": True}],
    },
    "spec": {"nodeName": "ip-1"},
    "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
}


def test_accessors_read_an_ordinary_object() -> None:
    assert objects.name(POD) == "web-0"
    assert objects.namespace(POD) == "team"
    assert objects.uid(POD) == "u-1"
    assert objects.resource_version(POD) == "42"
    assert objects.key(POD) == "team/web-0"
    assert objects.ref(POD) == "team/web-0"
    assert objects.labels(POD) == {"app": "web"}
    assert objects.annotations_of(POD) == {"a": "b"}
    assert objects.deleting(POD) is True
    assert objects.created_at(POD) == parse_rfc3339("2026-01-01T00:00:10Z") == 1_767_225_610.0
    assert objects.owner_kinds(POD) == {"ReplicaSet", "StatefulSet"}
    assert objects.controller_owner_kind(POD) == "StatefulSet"
    assert objects.condition(POD, "PodScheduled") == {"type": "PodScheduled", "status": "True"}
    assert objects.condition(POD, "Ready") is None
    assert objects.spec(POD) == {"nodeName": "ip-1"}


def test_key_defaults_the_namespace_and_ref_names_cluster_scoped_objects_alone() -> None:
    bare = {"metadata": {"name": "p"}}
    assert objects.key(bare) == "default/p"
    assert objects.ref(bare) == "p"
    assert objects.controller_owner_kind({"metadata": {"ownerReferences": [{"kind": "Job"}]}}) == "Job"
    assert objects.controller_owner_kind(bare) is None


@pytest.mark.parametrize("odd", [None, "text", 7, [], {}, {"metadata": "odd"}, {"metadata": None},
                                 {"metadata": {"labels": ["x"], "annotations": "y", "ownerReferences": {"kind": "x"},
                                               "creationTimestamp": "yesterday"},
                                  "status": {"conditions": "Ready"}, "spec": ["x"]}])
def test_odd_objects_read_as_absent(odd: object) -> None:
    assert objects.name(odd) == "" and objects.uid(odd) == "" and objects.namespace(odd) == ""
    assert objects.key(odd) == "default/" and objects.ref(odd) == ""
    assert objects.labels(odd) == {} and objects.annotations_of(odd) == {}
    assert objects.deleting(odd) is False and objects.created_at(odd) is None
    assert objects.owner_kinds(odd) == set() and objects.controller_owner_kind(odd) is None
    assert objects.conditions(odd) == () and not objects.is_ready(odd) and objects.ready_since(odd) is None
    assert objects.spec(odd) == {} and objects.provider_id(odd) == ""


def test_node_readiness_and_its_transition_time() -> None:
    ready = {"status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                       {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}]}}
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:01:00Z"}]}}
    assert objects.is_ready(ready) and objects.ready_since(ready) == 1_767_225_660.0
    assert not objects.is_ready(not_ready) and objects.ready_since(not_ready) is None


def test_timestamps_round_trip_and_malformed_ones_are_unknown() -> None:
    assert rfc3339(1_767_225_600.9) == "2026-01-01T00:00:00Z"
    assert parse_rfc3339("2026-01-01T01:00:00+01:00") == 1_767_225_600.0
    assert timestamp("2026-01-01T00:00:00Z") == 1_767_225_600.0
    assert timestamp("not a time") is None and timestamp(None) is None and timestamp(5) is None


def test_a_node_is_as_old_as_its_instance_launch_else_its_creation() -> None:
    created = "2026-01-01T00:10:00Z"
    adopted = {"metadata": {"creationTimestamp": created,
                            "annotations": {"groupless.dev/launched-at": "2026-01-01T00:08:20Z"}}}
    assert objects.launched_at(adopted) == parse_rfc3339(created) - 100
    malformed = {"metadata": {"creationTimestamp": created, "annotations": {"groupless.dev/launched-at": "soon"}}}
    assert objects.launched_at(malformed) == parse_rfc3339(created)
    assert objects.launched_at({"metadata": {"creationTimestamp": created}}) == parse_rfc3339(created)
    assert objects.launched_at({"metadata": {}}) is None
