"""The node view: each fact of a StateNode from its Node and pods, and the identity cache over snapshots."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.api.schemas import load_provisioner
from provisioner.model.resources import MIB, Resources
from provisioner.model.taints import Taint
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import pod_from_manifest
from provisioner.state.cluster import snapshot_of
from provisioner.state.nodes import NodeViews, state_node, state_node_of
from provisioner.state.solverinput import cluster_node
from tests.builders.pods import manifest

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z

PROVISIONER = load_provisioner({
    "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"},
    "spec": {"startupTaints": [{"key": "example.com/agent-not-ready", "effect": "NoExecute"}],
             "ttlSecondsUntilExpired": 600},
})


def node(name: str = "ip-1", *, ready: bool = True, managed: bool = True, **fields: Any) -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": "r6gd.xlarge", "karpenter.sh/capacity-type": "spot",
              "topology.kubernetes.io/zone": "ap-south-1a"}
    if managed:
        labels["karpenter.sh/provisioner-name"] = "default"
    obj: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels, "annotations": {}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"providerID": f"aws:///ap-south-1a/i-{name}", "taints": []},
        "status": {"capacity": {"cpu": "4", "memory": "30310Mi", "pods": "58"},
                   "allocatable": {"cpu": "3820m", "memory": "29217Mi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    for path, value in fields.items():
        section, field = path.split("__")
        obj[section] = {**obj[section], field: value}
    return obj


def pod(uid: str, cpu: str = "500m", node_name: str = "ip-1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running", **status}}


def test_facts_of_a_ready_managed_node() -> None:
    view = state_node_of(node(metadata__annotations={"groupless.dev/price-per-hour": "0.0691"}),
                         [pod("a"), pod("b", cpu="1")], PROVISIONER)
    assert view is not None
    assert (view.name, view.provisioner, view.instance_type, view.capacity_type, view.zone) == (
        "ip-1", "default", "r6gd.xlarge", "spot", "ap-south-1a")
    assert view.provider_id == "aws:///ap-south-1a/i-ip-1"
    assert (view.managed, view.ready, view.initialized, view.launching) == (True, True, True, False)
    assert (view.deleting, view.disrupted, view.cordoned, view.marked_for_deletion) == (False, False, False, False)
    assert view.allocatable == Resources({"cpu": 3820, "memory": 29217 * MIB, "pods": 58})
    assert view.capacity == Resources({"cpu": 4000, "memory": 30310 * MIB, "pods": 58})
    assert view.requested == Resources({"cpu": 1500, "pods": 2})
    assert view.available == Resources({"cpu": 2320, "memory": 29217 * MIB, "pods": 56})
    assert view.price == 0.0691
    assert view.created_at == NOW and view.expires_at == NOW + 600


def test_a_launching_node_hides_ephemeral_and_startup_taints_until_ready() -> None:
    taints = [{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},
              {"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule", "value": "true"},
              {"key": "example.com/agent-not-ready", "effect": "NoExecute"},
              {"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}]
    launching = state_node_of(node(ready=False, spec__taints=taints), [], PROVISIONER)
    assert launching is not None and launching.launching and not launching.initialized
    assert [t.key for t in launching.taints] == [t["key"] for t in taints]
    assert launching.scheduling_taints == (Taint("dedicated", "NoSchedule", "gpu"),)
    ready = state_node_of(node(spec__taints=taints), [], PROVISIONER)
    assert ready is not None and ready.scheduling_taints == ready.taints
    # a node Groupless does not manage is initialised as it is (Karpenter: unmanaged nodes always are)
    unmanaged = state_node_of(node(ready=False, managed=False, spec__taints=taints), [], None)
    assert unmanaged is not None and unmanaged.initialized and unmanaged.scheduling_taints == unmanaged.taints


def test_a_node_is_starting_until_its_last_startup_taint_is_gone() -> None:
    ours = {"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}
    lifecycle = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
    agent = {"key": "example.com/agent-not-ready", "effect": "NoExecute"}
    dedicated = {"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}

    def starting(*taints: dict[str, str], ready: bool = True, managed: bool = True) -> bool:
        view = state_node_of(node(ready=ready, managed=managed, spec__taints=list(taints)), [], PROVISIONER)
        assert view is not None
        return view.starting

    # as created: not Ready, our startup taint and the one kube-apiserver adds at creation
    assert starting(ours, lifecycle, dedicated, ready=False)
    # Ready: until the initialization controller and the node lifecycle controller have both acted
    assert starting(ours, dedicated)
    assert starting(lifecycle, dedicated)
    # and the Provisioner's startupTaints are removed by their agent
    assert starting(agent)
    assert not starting(dedicated)  # up: a permanent taint is the Provisioner's own
    # initialised once, then not Ready: failing, not starting
    assert not starting(unreachable, ready=False)
    assert not starting(ready=False)
    assert not starting(ours, ready=False, managed=False)  # a node Groupless does not manage never is


def test_cordoned_disrupted_and_deleting_nodes() -> None:
    cordoned = state_node(node(spec__unschedulable=True))
    assert cordoned is not None and cordoned.cordoned and not cordoned.marked_for_deletion
    assert cordoned.scheduling_taints == (Taint("node.kubernetes.io/unschedulable", "NoSchedule"),)
    disrupted = state_node(node(spec__taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]))
    assert disrupted is not None and disrupted.disrupted and disrupted.marked_for_deletion
    deleting = state_node(node(metadata__deletionTimestamp="2026-01-01T00:01:00Z"))
    assert deleting is not None and deleting.deleting and deleting.marked_for_deletion


def test_allocatable_and_capacity_fall_back_to_each_other_and_unreadable_lists_read_as_empty() -> None:
    only_capacity = state_node(node(status__allocatable={}))
    assert only_capacity is not None and only_capacity.allocatable == only_capacity.capacity == Resources(
        {"cpu": 4000, "memory": 30310 * MIB, "pods": 58})
    only_allocatable = state_node(node(status__capacity=None))
    assert only_allocatable is not None and only_allocatable.capacity == only_allocatable.allocatable
    broken = state_node(node(status__allocatable={"cpu": "lots", "memory": "1Gi"},
                             spec__taints=["not-a-taint", {"key": "k", "effect": "NoSchedule"}]))
    assert broken is not None
    assert broken.allocatable == Resources() and broken.allocatable_error is not None
    assert broken.allocatable_error.startswith("node ip-1: status.allocatable.cpu: invalid quantity 'lots'")
    assert broken.taints == (Taint("k", "NoSchedule"),)
    assert broken.taint_error == "node ip-1: spec.taints[0]: expected {key, effect}, got 'not-a-taint'"


def test_requested_counts_bound_pods_that_have_not_finished_and_a_slot_for_an_unreadable_one() -> None:
    unreadable = pod("x", cpu="lots")
    view = state_node(node(), [pod("a"), pod("done", cpu="4", phase="Succeeded"), unreadable])
    assert view is not None
    assert [p["metadata"]["uid"] for p in view.pods] == ["a", "x"]
    assert view.requested == Resources({"cpu": 500, "pods": 2})
    assert [p.name for p in view.bound_pods] == ["a", "x"]
    assert view.bound_pods[1].requests == Resources({"pods": 1})


def test_price_lookup_only_for_managed_nodes_without_the_annotation() -> None:
    seen: list[tuple[str, str, str]] = []

    def price_of(instance_type: str, capacity_type: str, zone: str) -> float | None:
        seen.append((instance_type, capacity_type, zone))
        return 0.2304

    managed = state_node(node(), price_of=price_of)
    unmanaged = state_node(node(managed=False), price_of=price_of)
    odd = state_node(node(metadata__annotations={"groupless.dev/price-per-hour": "-1"}))
    assert managed is not None and managed.price == 0.2304
    assert unmanaged is not None and unmanaged.price is None
    assert odd is not None and odd.price is None
    assert seen == [("r6gd.xlarge", "spot", "ap-south-1a")]


def test_nominations_held_and_displaced() -> None:
    annotation = ('{"deadline": "2026-01-01T00:05:00Z", "pods": {'
                  '"n1": {"pod": "default/n1", "requests": {"cpu": 2000}},'
                  '"n2": {"pod": "default/n2", "requests": {"cpu": 2000}},'
                  '"n3": {"pod": "default/n3", "requests": {"cpu": 100}}}}')
    view = state_node(node(metadata__annotations={"groupless.dev/nominations": annotation}), [pod("a")])
    assert view is not None and set(view.nominations.pods) == {"n1", "n2", "n3"}
    pods = {"n1": pod("n1", node_name=""), "n2": pod("n2", node_name=""), "n3": pod("n3", node_name="ip-2")}
    held = view.held(pods, NOW)
    assert set(held.pods) == {"n1", "n2"}  # n3 is bound elsewhere
    assert view.displaced(held) == {"n2"}  # 3820m - 500m bound: n1 fits, n2 no longer does
    assert not view.held(pods, NOW + 300).pods  # the deadline passed
    unreadable = state_node(node(status__allocatable={"cpu": "lots"}, status__capacity={},
                                 metadata__annotations={"groupless.dev/nominations": annotation}))
    assert unreadable is not None and unreadable.displaced(held) == set()
    # a node marked for deletion holds nothing: it will never run its nominated pods
    for marked in (node(metadata__annotations={"groupless.dev/nominations": annotation},
                        metadata__deletionTimestamp="2026-01-01T00:01:00Z"),
                   node(metadata__annotations={"groupless.dev/nominations": annotation},
                        spec__taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])):
        view = state_node(marked, [pod("a")])
        assert view is not None and set(view.nominations.pods) == {"n1", "n2", "n3"}
        assert view.held(pods, NOW).pods == {}


def test_solver_node_is_what_the_wire_reader_builds() -> None:
    obj = node(spec__taints=[{"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}])
    pods = [pod("a"), {**pod("p", cpu="250m"), "spec": {**pod("p")["spec"], "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "250m"}}, "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}]
    view = state_node(obj, pods)
    assert view is not None
    bound = tuple(pod_from_manifest(p) for p in pods)
    expected = ClusterNode(
        name="ip-1", taints=(Taint("dedicated", "NoSchedule", "gpu"),),
        allocatable=Resources({"cpu": 3820, "memory": 29217 * MIB, "pods": 58}),
        requested=Resources({"cpu": 750, "pods": 2}), provisioner="default", in_flight=False,
        marked_for_deletion=False, host_ports=tuple(hp for p in bound for hp in p.host_ports), pods=bound)
    got = view.solver_node
    assert got == expected
    assert dict(got.labels) == {**obj["metadata"]["labels"], "kubernetes.io/hostname": "ip-1"}
    assert got.labels["kubernetes.io/hostname"] == "ip-1"
    assert [hp.port for hp in view.host_ports] == [8080]


def test_node_views_reuse_unchanged_nodes_across_snapshots() -> None:
    nodes = [node("ip-1"), node("ip-2")]
    pods = [pod("a", node_name="ip-1"), pod("b", node_name="ip-2")]
    views = NodeViews()
    first_snapshot = snapshot_of(nodes=nodes, pods=pods, provisioners=[PROVISIONER])
    first = views.nodes(first_snapshot)
    assert views.nodes(first_snapshot) is first  # the same snapshot, the same mapping
    assert first["ip-1"].expires_at == NOW + 600  # the snapshot's decoded Provisioner
    # a pod binds to ip-2: only ip-2 is read again
    pods = [*pods, pod("c", node_name="ip-2")]
    second = views.nodes(snapshot_of(nodes=nodes, pods=pods, provisioners=[PROVISIONER]))
    assert second["ip-1"] is first["ip-1"] and second["ip-2"] is not first["ip-2"]
    assert second["ip-2"].requested == Resources({"cpu": 1000, "pods": 2})
    # ip-1's Node object is replaced (the cache never mutates one): ip-1 is read again
    changed = copy.deepcopy(nodes[0])
    changed["spec"]["unschedulable"] = True
    third = views.nodes(snapshot_of(nodes=[changed, nodes[1]], pods=pods, provisioners=[PROVISIONER]))
    assert third["ip-1"] is not second["ip-1"] and third["ip-1"].cordoned
    assert third["ip-2"] is second["ip-2"]
    # its Provisioner is replaced: every node of it is read again
    fourth = views.nodes(snapshot_of(nodes=[changed, nodes[1]], pods=pods))
    assert fourth["ip-2"] is not third["ip-2"] and fourth["ip-2"].expires_at is None


def test_odd_nodes_never_raise() -> None:
    assert state_node({"metadata": {}}) is None
    assert state_node({"kind": "Node"}) is None
    view = state_node({"metadata": {"name": "n", "labels": "x", "annotations": 5}, "spec": "s", "status": []})
    assert view is not None and view.labels == {} and view.allocatable == Resources() and not view.ready


def test_cluster_node_counts_bound_pods_and_held_nominations() -> None:
    annotation = ('{"deadline": "2099-01-01T00:00:00Z", "pods": {"u9": {"pod": "d/p9", "requests": {"cpu": 500}},'
                  ' "u1": {"pod": "d/a", "requests": {"cpu": 250}}}}')
    obj = {
        "metadata": {"name": "n1", "labels": {"karpenter.sh/provisioner-name": "default"},
                     "annotations": {"groupless.dev/nominations": annotation}},
        "spec": {"taints": [{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "3820m", "memory": "29217Mi", "pods": "58"}},
    }
    bound = manifest("a", cpu="250m", uid="u1", spec={"nodeName": "n1"})
    done = manifest("b", cpu="4", uid="u2", spec={"nodeName": "n1"}, status={"phase": "Succeeded"})
    other = manifest("c", cpu="1", uid="u3", spec={"nodeName": "n2"})
    nominated = manifest("p9", uid="u9", ns="d", status={"phase": "Pending"})
    snapshot = snapshot_of(nodes=[obj], pods=[bound, done, other, nominated])
    cn = cluster_node(NodeViews().nodes(snapshot)["n1"], snapshot, NOW)
    # the bound pod once (its nomination no longer holds) and the pending pod's nomination
    assert cn.requested == {"cpu": 750, "pods": 2}
    assert cn.allocatable["memory"] == 29217 * MIB
    assert (cn.provisioner, cn.in_flight, cn.marked_for_deletion) == ("default", True, False)
    # topology counts the bound pod and the one nominated there (it will be bound there)
    assert [p.name for p in cn.pods] == ["a", "p9"]


def test_cordoned_node_gets_the_unschedulable_taint() -> None:
    obj = {"metadata": {"name": "n"}, "spec": {"unschedulable": True},
           "status": {"allocatable": {"cpu": "2"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    view = state_node(obj)
    assert view is not None
    cn = view.solver_node
    assert [(t.key, t.effect) for t in cn.taints] == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    assert cn.in_flight is False


def test_daemonset_pinned_pods_count_on_their_node() -> None:
    ds_pod = manifest("agent-x", cpu="200m", uid="d1", spec={"nodeName": "n1", "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}})
    assert str(pod_from_manifest(ds_pod).required_node_affinity[0]) == "kubernetes.io/hostname In [n1]"
    view = state_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2"}}}, [ds_pod])
    assert view is not None and view.solver_node.requested == {"cpu": 200, "pods": 1}
