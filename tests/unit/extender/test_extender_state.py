"""Building the extender's view from Node/Pod objects and from the cache's snapshots."""

from __future__ import annotations

import copy
from typing import Any

from extender.state import ProvisionerInfo, SnapshotAdapter, build_state, node_info
from provisioner.model.resources import Resources
from provisioner.state import Snapshot
from tests.builders.nodes import node_manifest
from tests.fixtures.extender import cluster, now, state
from tests.fixtures.extender.build_fixtures import N1, N2, N6, N7, N8, NOMINATED

SMALL = {"cpu": "2", "memory": "4Gi", "pods": "10"}


def test_fixture_cluster_view() -> None:
    view = state()
    assert view.nodes[N1].requested == Resources({"cpu": 2100, "pods": 3})
    assert view.nodes[N6].provisioner is None and N6 not in view.managed
    assert view.nodes[N8].price == 0.0691
    assert view.nodes[N7].expires_at == now() + 600
    assert view.nominated == {N2}
    assert view.reservations[N2].held == Resources({"cpu": 3000, "pods": 3})
    assert view.reservations[N2].free == Resources({
        "cpu": 3820, "memory": 31408168 * 1024, "pods": 57, "ephemeral-storage": 18242267924})
    assert set(view.nominated_node) == set(NOMINATED.values())


def test_price_lookup_when_no_annotation() -> None:
    seen: list[tuple[str, str, str]] = []

    def price_of(instance_type: str, capacity_type: str, zone: str) -> float | None:
        seen.append((instance_type, capacity_type, zone))
        return 0.5

    info = node_info(node_manifest("a", provisioner="p", allocatable=SMALL, labels={
        "node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/capacity-type": "spot",
        "topology.kubernetes.io/zone": "z1"}), price_of=price_of)
    assert info is not None and info.price == 0.5
    assert seen == [("m5.large", "spot", "z1")]
    unmanaged = node_info(node_manifest("b", allocatable=SMALL), price_of=price_of)
    assert unmanaged is not None and unmanaged.price is None  # only our nodes are priced


def test_odd_objects_do_not_break_the_view() -> None:
    broken = node_manifest("c", provisioner="p", allocatable=SMALL)
    broken["metadata"]["annotations"] = {"groupless.dev/nominations": "{oops", "groupless.dev/price-per-hour": "-1"}
    broken["status"]["allocatable"] = {"cpu": "lots"}
    broken["spec"] = {"taints": ["not-a-taint", {"key": "k", "effect": "NoSchedule"}]}
    pods = [{"metadata": {"uid": "x"}, "spec": {"nodeName": "c", "containers": [{"resources": {"requests": {"cpu": "?"}}}]}},
            {"metadata": "odd"}, {"spec": {"nodeName": 7}}]
    view = build_state([broken, {"metadata": {}}, {"kind": "Node"}], pods, [ProvisionerInfo("p")])
    info = view.nodes["c"]
    assert info.nominations.malformed and not info.nominations
    assert info.price is None and info.allocatable == Resources()
    assert [t.key for t in info.taints] == ["k"]
    assert info.requested == Resources({"pods": 1})
    assert list(view.nodes) == ["c"]


def test_snapshot_adapter_reuses_unchanged_nodes() -> None:
    from provisioner.api.schemas import load_provisioner

    data = cluster()
    provisioners = {p["metadata"]["name"]: load_provisioner(p) for p in data["provisioners"]}
    pods = {p["metadata"]["uid"]: p for p in data["pods"]}
    by_node: dict[str, tuple[dict[str, Any], ...]] = {}
    for pod in data["pods"]:
        if pod["spec"].get("nodeName"):
            by_node[pod["spec"]["nodeName"]] = (*by_node.get(pod["spec"]["nodeName"], ()), pod)
    nodes = {n["metadata"]["name"]: n for n in data["nodes"]}
    adapter = SnapshotAdapter()
    first = adapter.build(Snapshot(nodes=nodes, pods=pods, pods_by_node=by_node, provisioners=provisioners))
    assert first.reservations.keys() == {N2}
    # a nominated pod binds to N1: N1 is rebuilt, N8 is the very same NodeInfo
    uid = NOMINATED["inflate-6cd4d7d8f9-kq2xv"]
    bound = copy.deepcopy(pods[uid])
    bound["spec"]["nodeName"] = N1
    pods = {**pods, uid: bound}
    by_node = {**by_node, N1: (*by_node[N1], bound)}
    second = adapter.build(Snapshot(nodes=nodes, pods=pods, pods_by_node=by_node, provisioners=provisioners))
    assert second.nodes[N8] is first.nodes[N8]
    assert second.nodes[N1] is not first.nodes[N1]
    assert second.nodes[N1].requested == Resources({"cpu": 3100, "pods": 4})
    assert second.reservations[N2].uids == frozenset(NOMINATED.values()) - {uid}
    # the pod is deleted: its reservation ends too (the other two still hold)
    pods = {k: v for k, v in pods.items() if k != NOMINATED["inflate-6cd4d7d8f9-m8dzt"]}
    third = adapter.build(Snapshot(nodes=nodes, pods=pods, pods_by_node=by_node, provisioners=provisioners))
    assert third.reservations[N2].uids == {NOMINATED["inflate-6cd4d7d8f9-tw4pl"]}
