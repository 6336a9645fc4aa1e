"""The nomination lifecycle beside its codec: when room is held, when an entry is pruned, who is displaced."""

from __future__ import annotations

from typing import Any

from provisioner.model import nominations as nom
from provisioner.model.nominations import NominatedPod, Nominations
from provisioner.model.resources import GIB, Resources

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DEADLINE = NOW + 300


def pod(uid: str, *, node: str = "", deleting: bool = False, scheduled_at: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"uid": uid, "name": uid, "namespace": "default"}, "spec": {}, "status": {}}
    if node:
        obj["spec"]["nodeName"] = node
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if scheduled_at is not None:
        obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at}]
    return obj


def nominations(*uids: str, cpu: int = 500, deadline: float = DEADLINE) -> Nominations:
    return Nominations(deadline=deadline,
                       pods={u: NominatedPod(f"default/{u}", Resources({"cpu": cpu, "pods": 1})) for u in uids})


PODS = {
    "pending": pod("pending"),
    "bound": pod("bound", node="ip-2", scheduled_at="2025-12-31T23:59:50Z"),  # bound 10 s ago
    "bound-long-ago": pod("bound-long-ago", node="ip-2", scheduled_at="2025-12-31T23:59:00Z"),  # 60 s ago
    "bound-unknown": pod("bound-unknown", node="ip-2"),
    "deleting": pod("deleting", deleting=True),
}
ALL = ("pending", "bound", "bound-long-ago", "bound-unknown", "deleting", "absent")


def test_ended_names_bound_deleting_and_absent_pods() -> None:
    assert nom.ended(nominations(*ALL), PODS) == {"bound", "bound-long-ago", "bound-unknown", "deleting", "absent"}


def test_held_keeps_pods_that_exist_unbound_and_not_deleting_before_the_deadline() -> None:
    held = nom.held(nominations(*ALL), PODS, NOW)
    assert set(held.pods) == {"pending"} and held.deadline == DEADLINE
    assert nom.reserved(held) == Resources({"cpu": 500, "pods": 1})
    assert not nom.held(nominations(*ALL), PODS, DEADLINE).pods  # the deadline ends every one
    assert set(nom.held(nominations(*ALL), PODS, DEADLINE - 1).pods) == {"pending"}


def test_pruned_drops_absent_pods_and_pods_bound_for_the_grace() -> None:
    assert nom.BIND_GRACE_SECONDS == 30.0
    kept = nom.pruned(nominations(*ALL), PODS, NOW)
    # bound 10 s ago: kept for the extender; bound 60 s ago or at an unknown time: pruned;
    # being deleted: kept until it is gone; absent: pruned
    assert set(kept.pods) == {"pending", "bound", "deleting"}
    assert set(nom.pruned(nominations(*ALL), PODS, NOW + 20).pods) == {"pending", "deleting"}
    assert set(nom.pruned(nominations(*ALL), PODS, NOW, bind_grace=5).pods) == {"pending", "deleting"}
    assert not nom.pruned(nominations(*ALL), PODS, DEADLINE).pods


def test_displaced_in_uid_order_with_a_pod_slot_each() -> None:
    three = Nominations(deadline=DEADLINE, pods={
        "c": NominatedPod("default/c", Resources({"cpu": 1000})),
        "a": NominatedPod("default/a", Resources({"cpu": 1000})),
        "b": NominatedPod("default/b", Resources({"cpu": 1000})),
    })
    allocatable = Resources({"cpu": 4000, "pods": 10})
    assert nom.displaced(three, allocatable, Resources({"cpu": 1500, "pods": 1})) == {"c"}  # a, b fit; c does not
    assert nom.displaced(three, allocatable, Resources({"cpu": 2500, "pods": 1})) == {"b", "c"}
    assert nom.displaced(three, allocatable, Resources()) == set()
    # the pods slot counts: two slots left, three nominated pods without a slot in their requests
    assert nom.displaced(three, Resources({"cpu": 4000, "pods": 3}), Resources({"pods": 1})) == {"c"}
    # a node without an allocatable (not registered yet) displaces nothing
    assert nom.displaced(three, Resources(), Resources({"cpu": 9000})) == set()
    assert nom.displaced(nom.EMPTY, allocatable, Resources({"cpu": 9000})) == set()


def test_one_pod_slot_per_nominated_pod() -> None:
    assert nom.with_pod_slot(Resources({"cpu": 500})) == Resources({"cpu": 500, "pods": 1})
    assert nom.with_pod_slot(Resources({"cpu": 500, "pods": 1})) == Resources({"cpu": 500, "pods": 1})
    assert nom.with_pod_slot(Resources({"memory": GIB, "pods": 2})) == Resources({"memory": GIB, "pods": 2})
    two = Nominations(deadline=DEADLINE, pods={"a": NominatedPod("d/a", Resources({"cpu": 1})),
                                               "b": NominatedPod("d/b", Resources({"cpu": 1, "pods": 1}))})
    assert nom.reserved(two) == Resources({"cpu": 2, "pods": 2})
