"""One pod classification: exact verdicts for each class, and odd objects never raise."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.model import pods

UNSCHEDULABLE = {"phase": "Pending",
                 "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}


def pod(**parts: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {},
                           "status": dict(UNSCHEDULABLE)}
    for path, value in parts.items():
        section, field = path.split("__")
        obj[section] = {**obj[section], field: value}
    return obj


def test_terminal_phases() -> None:
    assert pods.TERMINAL_PHASES == {"Succeeded", "Failed"}
    assert [pods.is_terminal(pod(status__phase=p)) for p in ("Succeeded", "Failed", "Running", "Pending", "")] == [
        True, True, False, False, False]


def test_owners_daemonset_and_static() -> None:
    ds = pod(metadata__ownerReferences=[{"kind": "DaemonSet", "name": "agent", "controller": True}])
    # any owner reference counts (Karpenter IsOwnedByDaemonSet), not only the controller
    co_owned = pod(metadata__ownerReferences=[{"kind": "ReplicaSet", "controller": True}, {"kind": "DaemonSet"}])
    by_node = pod(metadata__ownerReferences=[{"kind": "Node", "name": "ip-1"}])
    mirror = pod(metadata__annotations={"kubernetes.io/config.mirror": "abc"})
    assert (pods.is_daemonset_pod(ds), pods.is_daemonset_pod(co_owned), pods.is_daemonset_pod(mirror)) == (
        True, True, False)
    assert (pods.is_static_pod(by_node), pods.is_static_pod(mirror), pods.is_static_pod(ds)) == (True, True, False)


def test_binding_deletion_and_unschedulable() -> None:
    bound = pod(spec__nodeName="ip-1")
    assert pods.is_bound(bound) and pods.node_name(bound) == "ip-1"
    assert not pods.is_bound(pod()) and pods.node_name(pod()) == ""
    assert pods.is_deleting(pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"))
    assert pods.is_unschedulable(pod())
    assert not pods.is_unschedulable(pod(status__conditions=[{"type": "PodScheduled", "status": "False",
                                                              "reason": "SchedulerError"}]))
    assert not pods.is_unschedulable(pod(status__conditions=[]))
    # capacity planned for a pod is wanted while it exists, unbound and not being deleted
    assert pods.awaits_capacity(pod())
    assert not pods.awaits_capacity(bound)
    assert not pods.awaits_capacity(pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"))
    assert not pods.awaits_capacity(None)


def test_bound_since_is_the_pod_scheduled_transition() -> None:
    scheduled = pod(status__conditions=[{"type": "PodScheduled", "status": "True",
                                         "lastTransitionTime": "2026-01-01T00:00:30Z"}])
    assert pods.bound_since(scheduled) == 1_767_225_630.0
    assert pods.bound_since(pod()) is None  # PodScheduled=False
    assert pods.bound_since(pod(status__conditions=[{"type": "PodScheduled", "status": "True"}])) is None


def test_not_provisionable_reasons_in_order() -> None:
    assert pods.not_provisionable_reason(pod()) is None
    assert pods.not_provisionable_reason(pod(spec__nodeName="n")) == "bound"
    assert pods.not_provisionable_reason(pod(status__phase="Succeeded")) == "terminal"
    assert pods.not_provisionable_reason(pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z")) == "being deleted"
    assert pods.not_provisionable_reason(pod(status__nominatedNodeName="n")) == "kube-scheduler is preempting for it"
    assert pods.not_provisionable_reason(pod(metadata__ownerReferences=[{"kind": "DaemonSet"}])) == "owned by a DaemonSet"
    assert pods.not_provisionable_reason(pod(metadata__ownerReferences=[{"kind": "Node"}])) == "owned by a Node"
    assert pods.not_provisionable_reason(pod(metadata__annotations={"kubernetes.io/config.mirror": "x"})) == (
        "owned by a Node")
    assert pods.not_provisionable_reason(pod(status__conditions=[])) == "kube-scheduler has not marked it Unschedulable"
    assert pods.not_provisionable_reason(pod(), nominated_uids={"u1"}) == "nominated to an in-flight node"


def test_a_dry_run_does_not_need_the_schedulers_verdict() -> None:
    manifest = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    assert pods.not_provisionable_reason(manifest) == "kube-scheduler has not marked it Unschedulable"
    assert pods.not_provisionable_reason(manifest, require_unschedulable=False) is None
    assert pods.not_provisionable_reason({**manifest, "spec": {"nodeName": "n"}}, require_unschedulable=False) == "bound"


CREATED = "2026-01-01T00:00:00Z"  # 1_767_225_600.0


def test_a_pod_kube_scheduler_has_not_tried_for_the_grace_counts_as_unschedulable() -> None:
    untried = pod(metadata__creationTimestamp=CREATED, status__conditions=[])
    created = 1_767_225_600.0
    assert pods.waits_for_first_attempt(untried, created + 5.0, 5.0)
    assert not pods.waits_for_first_attempt(untried, created + 4.9, 5.0)
    assert pods.not_provisionable_reason(untried, now=created + 5.0, untried_grace=5.0) is None
    assert pods.not_provisionable_reason(untried, now=created + 4.9, untried_grace=5.0) == (
        "kube-scheduler has not marked it Unschedulable")
    assert pods.not_provisionable_reason(untried, now=created + 60.0) == "kube-scheduler has not marked it Unschedulable"
    # tried (any PodScheduled condition: gated, a scheduler error), bound, another scheduler's, no creation time
    gated = pod(metadata__creationTimestamp=CREATED,
                status__conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    other = pod(metadata__creationTimestamp=CREATED, status__conditions=[], spec__schedulerName="batch-scheduler")
    named = pod(metadata__creationTimestamp=CREATED, status__conditions=[], spec__schedulerName="default-scheduler")
    bound = pod(metadata__creationTimestamp=CREATED, status__conditions=[], spec__nodeName="n")
    undated = pod(status__conditions=[])
    later = created + 60.0
    assert [pods.waits_for_first_attempt(p, later, 5.0) for p in (gated, other, named, bound, undated)] == [
        False, False, True, False, False]
    assert pods.not_provisionable_reason(gated, now=later, untried_grace=5.0) == (
        "kube-scheduler has not marked it Unschedulable")
    assert pods.not_provisionable_reason(bound, now=later, untried_grace=5.0) == "bound"


@pytest.mark.parametrize(("odd", "reason"), [
    ("odd", "not an object"), ({"metadata": "odd"}, "malformed pod"), ({"spec": ["x"]}, "malformed pod"),
    ({"status": 3}, "malformed pod"),
])
def test_odd_pods_are_not_provisionable_and_classify_as_nothing(odd: Any, reason: str) -> None:
    assert pods.not_provisionable_reason(odd) == reason
    assert not (pods.is_terminal(odd) or pods.is_daemonset_pod(odd) or pods.is_static_pod(odd) or pods.is_bound(odd)
                or pods.is_deleting(odd) or pods.is_unschedulable(odd))
    assert pods.bound_since(odd) is None and pods.phase(odd) == ""
