"""Consolidation through the controller process's wiring, on a fake clock, with exact outcomes.

Default guards unless a test sets them: settle period 30 s, re-validation 15 s after a
decision, minimum savings 10 %, at most 10 % of the nodes (at least one) disrupted at once,
spot replaced by spot only with 15 cheaper instance types.
"""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client import REGISTRY

from provisioner.model import labels as wk
from provisioner.model.replacements import REPLACEMENTS_ANNOTATION

from .harness import Cluster

SETTLE = 30
VALIDATION = 15


def counter(kind: str, outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "groupless_consolidation_actions_total", {"kind": kind, "outcome": outcome})
    return value or 0.0


def decide(cluster: Cluster) -> None:
    """First pass sees the nodes, the next after the settle period decides."""
    cluster.consolidate()
    cluster.step(SETTLE)
    cluster.consolidate()


def test_a_node_whose_pods_fit_elsewhere_is_deleted(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    started = counter("delete", "started")
    with caplog.at_level(logging.INFO):
        decide(cluster)
        pending = cluster.consolidation.pending
        assert pending is not None and pending.move.nodes == (a,) and pending.move.kind == "delete"
        assert f"Consolidation found: delete 1 node(s) ({a}): 1 pod(s) move, 0.2020 -> 0.0000 USD/hour, " \
               "saves 0.2020 USD/hour; re-validating in 15s" in caplog.text
        assert wk.DISRUPTED_TAINT_KEY not in cluster.taint_keys(a)
        cluster.step(VALIDATION)
        cluster.consolidate()
        assert f"Consolidating: delete 1 node(s) ({a})" in caplog.text
    assert counter("delete", "started") == started + 1
    assert cluster.messages(a, "ConsolidationApproved") == [
        f"delete 1 node(s) ({a}): 1 pod(s) move, 0.2020 -> 0.0000 USD/hour, saves 0.2020 USD/hour"]
    cluster.run(5)  # its pod's room on b is recorded, b is Ready: deleted, drained, terminated
    assert cluster.nodes() == [b]
    assert [m.name for m in cluster.cloud.machines] == [b]
    assert cluster.cloud.create_calls == []
    assert sorted(p["metadata"]["name"] for p in cluster.api.list("Pod", "default")[0]) == ["web-b"]  # evicted


def test_an_empty_node_is_deleted_and_daemonset_pods_do_not_count() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.daemonset_pod("ds-a", a)
    cluster.daemonset_pod("ds-b", b)
    cluster.pod("web-b", b, "1")
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None and (pending.move.nodes, pending.move.pods) == ((a,), 0)
    cluster.step(VALIDATION)
    cluster.consolidate()  # nothing to wait for: deleted, drained (DaemonSet pods stay) and terminated at once
    assert cluster.nodes() == [b]
    assert [m.name for m in cluster.cloud.machines] == [b]


def test_a_node_is_replaced_by_one_cheaper_node() -> None:
    cluster = Cluster()
    cluster.provisioner()
    big = cluster.node("m5.2xlarge")
    cluster.pod("web-1", big, "1")
    cluster.pod("web-2", big, "500m")
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None
    assert [(n.instance_type.name, n.price) for n in pending.move.replacements] == [("m5.large", 0.101)]
    assert pending.move.savings == pytest.approx(0.303)
    cluster.step(VALIDATION)
    cluster.consolidate()
    assert wk.DISRUPTED_TAINT_KEY in cluster.taint_keys(big)
    (new,) = [n for n in cluster.nodes() if n != big]
    assert json.loads(cluster.node_object(big)["metadata"]["annotations"][REPLACEMENTS_ANNOTATION]) == [new]
    assert cluster.node_object(new)["metadata"]["labels"][wk.INSTANCE_TYPE] == "m5.large"
    cluster.step(30)  # the replacement is not Ready: nothing is drained
    assert cluster.nodes() == sorted([big, new])
    assert [c for c in cluster.api.calls if c[0] == "evict"] == []
    cluster.run(5)
    assert cluster.nodes() == [new]
    assert REGISTRY.get_sample_value("groupless_nodes_terminated_total",
                                             {"provisioner": "default", "reason": "consolidation"}) >= 1


def test_several_nodes_are_repacked_into_fewer() -> None:
    cluster = Cluster(consolidation_max_disrupted="1")
    cluster.provisioner()
    nodes = [cluster.node() for _ in range(3)]
    for i, name in enumerate(nodes):
        cluster.pod(f"web-{i}", name, "2500m")
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None
    assert pending.move.nodes == tuple(sorted(nodes))
    assert [n.instance_type.name for n in pending.move.replacements] == ["m5.2xlarge"]
    assert pending.move.savings == pytest.approx(0.606 - 0.404)
    cluster.step(VALIDATION)
    cluster.consolidate()
    (new,) = [n for n in cluster.nodes() if n not in nodes]
    for name in nodes:
        assert json.loads(cluster.node_object(name)["metadata"]["annotations"][REPLACEMENTS_ANNOTATION]) == [new]
    cluster.run(5)
    assert cluster.nodes() == [new]
    assert cluster.instance_types_of_nodes() == ["m5.2xlarge"]


def test_a_move_saving_less_than_the_minimum_share_is_refused() -> None:
    cluster = Cluster(consolidation_min_savings="0.6")
    cluster.provisioner()
    node = cluster.node()
    cluster.pod("web", node, "1500m")
    decide(cluster)
    assert cluster.consolidation.pending is None
    assert cluster.messages(node, "Unconsolidatable") == [
        "saves 0.1010 of 0.2020 USD/hour, less than the minimum share 0.6"]


def test_a_node_is_a_candidate_only_after_the_settle_period() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-b", b, "1")
    cluster.consolidate()
    cluster.step(20)
    cluster.pod("web-a", a, "1")  # a pod bound: a's clock starts again
    cluster.step(SETTLE - 20)
    cluster.consolidate()
    pending = cluster.consolidation.pending
    assert pending is not None and pending.move.nodes == (b,)  # b has been stable for 30 s, a for 10 s
    assert cluster.messages(a, "Unconsolidatable") == []  # waiting to settle is no news


def test_the_share_of_nodes_disrupted_at_once_holds_moves_back() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b, c = cluster.node(), cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    cluster.pod("web-c", c, "1", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true"})
    cluster.api.delete("Node", c)  # draining, held by its do-not-evict pod
    decide(cluster)  # 10 % of 3 nodes is one node, and c is disrupted already
    assert cluster.nodes() == sorted([a, b, c])
    assert cluster.consolidation.pending is None
    assert cluster.messages(a, "Unconsolidatable") == ["the share of nodes disrupted at once is reached"]


def test_spot_is_only_deleted_without_fifteen_cheaper_options() -> None:
    cluster = Cluster()
    cluster.provisioner(capacity_types=("spot",))
    node = cluster.node("m5.2xlarge", capacity_type="spot")
    cluster.pod("web", node, "1")
    decide(cluster)
    assert cluster.consolidation.pending is None
    assert cluster.messages(node, "Unconsolidatable") == [
        "spot-to-spot replacement needs 15 cheaper instance types, found 2: spot nodes are only deleted"]


def test_spot_is_replaced_by_spot_with_fifteen_cheaper_options() -> None:
    from provisioner.cloudprovider.fake import make_instance_type
    from provisioner.model.resources import MIB

    from .harness import ZONES, catalog

    small = [make_instance_type(f"c{i}.large", 2000, 7577 * MIB, 29, zones=ZONES, price=0.1 + i / 1000,
                                overhead={"cpu": 70}) for i in range(15)]
    cluster = Cluster(instance_types=catalog() + small)
    cluster.provisioner(capacity_types=("spot",))
    node = cluster.node("m5.2xlarge", capacity_type="spot")
    cluster.pod("web", node, "1")
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None
    (replacement,) = pending.move.replacements
    assert (replacement.instance_type.name, replacement.offering.capacity_type) == ("c0.large", "spot")
    cluster.step(VALIDATION)
    cluster.consolidate()
    (request,) = cluster.cloud.create_calls  # launched among the 15 cheapest spot options only, pinned to spot
    names = [it.name for it in request.instance_type_options]
    assert len(names) == 15 and names[0] == "c0.large" and not {"m5.xlarge", "m5.2xlarge"} & set(names)
    assert request.requirements.get(wk.CAPACITY_TYPE).values == frozenset({"spot"})
    cluster.run(5)
    assert cluster.instance_types_of_nodes() == ["c0.large"]


def test_spot_nodes_whose_pods_fit_elsewhere_are_deleted() -> None:
    cluster = Cluster()
    cluster.provisioner(capacity_types=("spot",))
    a, b = cluster.node(capacity_type="spot"), cluster.node(capacity_type="spot")
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None and (pending.move.kind, pending.move.nodes) == ("delete", (a,))


def test_a_pdb_that_allows_no_disruption_keeps_the_node() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("db-a", a, "1", labels={"app": "db"})
    cluster.pod("web-b", b, "3")
    cluster.api.create("PodDisruptionBudget", {"metadata": {"name": "db", "namespace": "default"},
                                               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    decide(cluster)
    assert cluster.consolidation.pending is None
    assert cluster.messages(a, "Unconsolidatable") == [
        "PodDisruptionBudget default/db allows no disruption of pod default/db-a now"]


@pytest.mark.parametrize(("where", "reason"), [
    ("node", "annotation karpenter.sh/do-not-consolidate=true"),
    ("pod", "pod default/web-a has annotation karpenter.sh/do-not-evict=true"),
    ("owner", "pod default/web-a has no controller (it would not be recreated)"),
])
def test_do_not_consolidate_do_not_evict_and_bare_pods_keep_the_node(where: str, reason: str) -> None:
    cluster = Cluster()
    cluster.provisioner()
    a = cluster.node(annotations={wk.DO_NOT_CONSOLIDATE_ANNOTATION: "true"} if where == "node" else None)
    b = cluster.node()
    cluster.pod("web-a", a, "1", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true"} if where == "pod" else None,
                owner=None if where == "owner" else "ReplicaSet")
    cluster.pod("web-b", b, "3")
    decide(cluster)
    assert cluster.consolidation.pending is None
    assert cluster.messages(a, "Unconsolidatable") == [reason]


def test_a_move_is_dropped_when_the_cluster_changed_before_it_acts(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    dropped = counter("delete", "dropped")
    decide(cluster)
    assert cluster.consolidation.pending is not None
    cluster.step(5)
    cluster.pod("web-a2", a, "1")  # kube-scheduler bound another pod to it meanwhile
    cluster.step(VALIDATION - 5)
    with caplog.at_level(logging.INFO):
        cluster.consolidate()
    assert cluster.consolidation.pending is None
    assert f"Consolidation dropped on re-validation (the pods of node {a} changed)" in caplog.text
    assert cluster.messages(a, "Unconsolidatable") == [
        f"Consolidation dropped on re-validation: the pods of node {a} changed"]
    assert counter("delete", "dropped") == dropped + 1
    assert wk.DISRUPTED_TAINT_KEY not in cluster.taint_keys(a)
    assert cluster.nodes() == sorted([a, b])


def test_nothing_moves_while_a_pod_is_pending_for_the_provisioner() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    cluster.pod("waiting", None, "64")  # pending: no instance type holds it
    decide(cluster)
    assert cluster.consolidation.pending is None
    assert cluster.consolidation.pending is None and cluster.messages(a, "Unconsolidatable") == []


def test_a_replacement_is_kept_while_the_node_it_replaces_drains() -> None:
    cluster = Cluster(consolidation_max_disrupted="1")
    cluster.provisioner()
    old, new, other = cluster.node(), cluster.node(), cluster.node()
    cluster.pod("held", old, "1", annotations={wk.DO_NOT_EVICT_ANNOTATION: "true"})
    cluster.pod("web", other, "1")
    cluster.api.patch("Node", old, {"metadata": {"annotations": {REPLACEMENTS_ANNOTATION: json.dumps([new])}}})
    cluster.api.delete("Node", old)  # draining, held by its do-not-evict pod
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None and pending.move.nodes == (other,)  # new is empty but kept: old's pods are coming
    assert cluster.messages(new, "Unconsolidatable") == [f"it replaces node(s) {old}, still draining"]


def test_taking_do_not_consolidate_off_lets_the_node_go() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a = cluster.node(annotations={wk.DO_NOT_CONSOLIDATE_ANNOTATION: "true"})
    b = cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "3")
    decide(cluster)
    assert cluster.consolidation.pending is None
    cluster.api.patch("Node", a, {"metadata": {"annotations": {wk.DO_NOT_CONSOLIDATE_ANNOTATION: None}}})
    cluster.step(1)
    cluster.consolidate()
    pending = cluster.consolidation.pending
    assert pending is not None and pending.move.nodes == (a,)


def test_a_move_without_replacement_capacity_is_called_off() -> None:
    from provisioner.cloudprovider.types import LaunchError

    cluster = Cluster()
    cluster.provisioner()
    big = cluster.node("m5.2xlarge")
    cluster.pod("web", big, "1")
    failed = counter("replace", "failed")
    decide(cluster)
    assert cluster.consolidation.pending is not None
    cluster.cloud.next_error = LaunchError("the account's vCPU quota is reached")
    cluster.step(VALIDATION)
    cluster.consolidate()
    assert counter("replace", "failed") == failed + 1
    assert wk.DISRUPTED_TAINT_KEY not in cluster.taint_keys(big)
    annotations = cluster.node_object(big)["metadata"].get("annotations", {})
    assert "groupless.dev/disruption-reason" not in annotations and REPLACEMENTS_ANNOTATION not in annotations
    assert len(cluster.messages(big, "ReplacementFailed")) == 1
    assert cluster.nodes() == [big]
    assert [m.name for m in cluster.cloud.machines] == [big]  # no instance left behind


def test_a_move_left_without_its_replacement_record_is_called_off_at_the_next_pass() -> None:
    cluster = Cluster()
    cluster.provisioner()
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    # what a controller stopped between its two writes leaves: the taint and its reason, no record
    cluster.api.patch("Node", a, {
        "metadata": {"annotations": {"groupless.dev/disruption-reason": "consolidation"}},
        "spec": {"taints": [{"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]},
    })
    cluster.settle()
    assert cluster.nodes() == sorted([a, b])  # expiration leaves it to consolidation
    cluster.consolidate()
    assert wk.DISRUPTED_TAINT_KEY not in cluster.taint_keys(a)
    assert "groupless.dev/disruption-reason" not in cluster.node_object(a)["metadata"].get("annotations", {})


def test_a_pod_pending_for_another_provisioner_does_not_hold_consolidation() -> None:
    cluster = Cluster()
    cluster.provisioner()
    cluster.provisioner("gpu", consolidation={"enabled": False},
                        taints=[{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}])
    a, b = cluster.node(), cluster.node()
    cluster.pod("web-a", a, "1")
    cluster.pod("web-b", b, "1")
    waiting = cluster.pod("waiting", None, "64")
    cluster.api.patch("Pod", "waiting", {"spec": {
        "nodeSelector": {wk.PROVISIONER_NAME: "gpu"},
        "tolerations": [{"key": "example.com/gpu", "operator": "Exists"}]}}, "default")
    assert waiting["status"]["phase"] == "Pending"
    decide(cluster)
    pending = cluster.consolidation.pending
    assert pending is not None and pending.move.nodes == (a,)
