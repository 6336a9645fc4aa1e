"""The filter rejects nodes whose Provisioner is deleted or being deleted (the ownership controller deletes them)."""

from __future__ import annotations

from typing import Any

from extender import handlers
from extender.state import ProvisionerInfo, build_state
from tests.builders.nodes import node_manifest

NOW = 1_767_225_600.0


def request(*names: str) -> dict[str, Any]:
    return {"Pod": {"metadata": {"name": "orphan", "namespace": "default", "uid": "u-orphan"},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}},
            "NodeNames": list(names)}


NODES = [node_manifest("kept", provisioner="default"), node_manifest("gone", provisioner="old"),
         node_manifest("going", provisioner="draining"), node_manifest("theirs")]


def test_nodes_of_absent_and_deleting_provisioners_are_unresolvable_and_named_nowhere() -> None:
    provisioners = [ProvisionerInfo("default"), ProvisionerInfo("draining", deleting=True)]
    state = build_state(NODES, [], provisioners, existing_provisioners=["default", "draining"])
    calls: list[str] = []
    answer = handlers.filter(request("kept", "gone", "going", "theirs"), state, NOW, calls.append)
    assert answer["NodeNames"] == ["kept", "theirs"]
    assert answer["FailedNodes"] == {}
    assert answer["FailedAndUnresolvableNodes"] == {
        "going": handlers.REASON_PROVISIONER_DELETED,
        "gone": handlers.REASON_PROVISIONER_DELETED,
    }
    assert handlers.REASON_PROVISIONER_DELETED == "node's Provisioner is deleted or being deleted"
    assert calls == []


def test_no_node_left_signals_provisioning_with_the_rule_in_the_reason() -> None:
    state = build_state(NODES, [], [ProvisionerInfo("draining", deleting=True)], existing_provisioners=["draining"])
    calls: list[str] = []
    answer = handlers.filter(request("gone", "going"), state, NOW, calls.append)
    assert answer["NodeNames"] == []
    assert set(answer["FailedAndUnresolvableNodes"].values()) == {
        handlers.REASON_PROVISIONER_DELETED + handlers.PROVISIONING_SUFFIX}
    assert calls == ["u-orphan"]


def test_an_unlisted_provisioner_is_not_a_deleted_one() -> None:
    """Before the cache has listed Provisioners (``existing_provisioners`` None) nothing is rejected for it."""
    state = build_state(NODES, [], [ProvisionerInfo("default")])
    answer = handlers.filter(request("kept", "gone", "theirs"), state, NOW)
    assert answer["NodeNames"] == ["kept", "gone", "theirs"]
    assert answer["FailedAndUnresolvableNodes"] == {}


def test_deleting_is_read_from_the_provisioner_metadata() -> None:
    from provisioner.api.defaults import default_provisioner  # noqa: PLC0415
    from provisioner.api.schemas import load_provisioner  # noqa: PLC0415

    obj = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
           "metadata": {"name": "draining", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}
    assert ProvisionerInfo.from_provisioner(load_provisioner(default_provisioner(obj))).deleting is True
