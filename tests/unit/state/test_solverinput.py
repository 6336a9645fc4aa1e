"""The one solver-input builder: which pods, nodes, room and limits usage the solver is given."""

from __future__ import annotations

import copy
from typing import Any

from provisioner.api.schemas import load_provisioner
from provisioner.model.resources import Resources
from provisioner.state.cluster import Snapshot, snapshot_of
from provisioner.state.nodes import NodeViews
from provisioner.state.solverinput import (
    active_provisioners,
    build_solver_input,
    candidate_nodes,
    covered_pods,
    merged,
    provisionable_pods,
)
from tests.builders.catalog import instance_type

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
UNSCHEDULABLE = {"phase": "Pending",
                 "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}


def provisioner(name: str = "default") -> Any:
    return load_provisioner({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name},
                             "spec": {}})


def node(name: str, *, cpu: str = "4", nominations: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"groupless.dev/nominations": nominations} if nominations else {}
    return {"metadata": {"name": name, "labels": {"karpenter.sh/provisioner-name": "default"},
                         "annotations": annotations},
            "spec": spec,
            "status": {"capacity": {"cpu": cpu, "pods": "10"}, "allocatable": {"cpu": cpu, "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(uid: str, cpu: str = "1", node_name: str = "", **metadata: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": uid, "namespace": "default", "uid": uid, **metadata}, "spec": spec,
            "status": {"phase": "Running"} if node_name else dict(UNSCHEDULABLE)}


def nominations(*uids: str, cpu: int = 1000) -> str:
    entries = ",".join(f'"{u}": {{"pod": "default/{u}", "requests": {{"cpu": {cpu}, "pods": 1}}}}' for u in uids)
    return f'{{"deadline": "2026-01-01T00:05:00Z", "pods": {{{entries}}}}}'


def build(snapshot: Snapshot, pods: list[dict[str, Any]], **options: Any) -> Any:
    types = {"default": [instance_type("m5.xlarge", "amd64", 4000, 16384, 58, 3920, 15000, 0.192)]}
    return build_solver_input(snapshot, NodeViews().nodes(snapshot), pods, types, now=NOW, **options)


def test_nodes_room_held_for_nominations_and_reserved_room() -> None:
    snapshot = snapshot_of(
        nodes=[node("ip-1", nominations=nominations("waiting", "bound", "deleting", "gone")), node("ip-2")],
        pods=[pod("running", cpu="1", node_name="ip-1"), pod("waiting"), pod("bound", node_name="ip-2"),
              pod("deleting", deletionTimestamp="2026-01-01T00:00:00Z")],
        provisioners=[provisioner()])
    built = build(snapshot, [], reserved={"ip-2": Resources({"cpu": 500})})
    nodes = {n.name: n for n in built.input.nodes}
    # ip-1: the bound pod plus the one nomination that holds (exists, unbound, not deleting)
    assert nodes["ip-1"].requested == Resources({"cpu": 2000, "pods": 2})
    # ip-2: its bound pod plus the room promised there
    assert nodes["ip-2"].requested == Resources({"cpu": 1500, "pods": 1})
    after_deadline = build_solver_input(snapshot, NodeViews().nodes(snapshot), [], {}, now=NOW + 300)
    assert {n.name: n.requested for n in after_deadline.input.nodes}["ip-1"] == Resources({"cpu": 1000, "pods": 1})


def test_excluded_disrupted_and_unreadable_nodes_are_left_out_but_count_against_limits() -> None:
    broken = node("ip-3", taints=[{"key": "no-effect"}])
    snapshot = snapshot_of(
        nodes=[node("ip-1"), node("ip-2", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
               broken, node("ip-4")],
        provisioners=[provisioner()])
    built = build(snapshot, [], exclude={"ip-4"})
    assert [n.name for n in built.input.nodes] == ["ip-1"]
    assert [(r.kind, r.obj is broken, r.reason) for r in built.refused] == [
        ("Node", True, "node ip-3: spec.taints[0]: expected {key, effect}, got {'key': 'no-effect'}")]
    assert built.input.provisioner_usage == {"default": Resources({"cpu": 16000, "pods": 40})}


def test_written_nodes_stand_in_for_the_snapshots_unless_it_shows_them_deleting() -> None:
    snapshot = snapshot_of(nodes=[node("ip-1"), node("ip-2", cpu="2")], provisioners=[provisioner()])
    views = NodeViews()
    nominated = node("ip-1", nominations=nominations("waiting"))
    launched = node("ip-new", cpu="8")
    written = [views.view(nominated, snapshot), views.view(launched, snapshot)]
    built = build_solver_input(snapshot, views.nodes(snapshot), [], {}, now=NOW,
                               written=[w for w in written if w is not None])
    assert sorted(n.name for n in built.input.nodes) == ["ip-1", "ip-2", "ip-new"]
    assert built.input.provisioner_usage == {"default": Resources({"cpu": 14000, "pods": 30})}
    deleting = copy.deepcopy(node("ip-1"))
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gone = snapshot_of(nodes=[deleting], provisioners=[provisioner()])
    view = views.view(nominated, gone)
    assert view is not None
    shown = views.nodes(gone)
    assert merged(shown, [view])["ip-1"] is shown["ip-1"]


def test_pods_daemonsets_and_provisioners() -> None:
    bad = pod("bad", cpu="lots")
    ds = {"metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-1"},
          "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}}}
    going = {"metadata": {"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    snapshot = Snapshot(provisioners={"default": provisioner(), "old": provisioner("old"), "other": provisioner("other")},
                        provisioner_objects={"old": going}, daemonsets=(ds, {"metadata": {"name": "broken"}, "spec": {}}))
    assert sorted(active_provisioners(snapshot)) == ["default", "other"]
    built = build(snapshot, [pod("a"), bad])
    assert [p.uid for p in built.input.pods] == ["a"]
    assert [p.name for p in built.input.daemonsets] == ["agent"]
    assert [p.name for p in built.input.provisioners] == ["default"]  # "other" has no instance types
    assert [(r.kind, r.obj["metadata"]["name"]) for r in built.refused] == [("Pod", "bad"), ("DaemonSet", "broken")]
    assert built.refused[0].reason.startswith("spec.containers[0].resources.requests.cpu: invalid quantity 'lots'")
    assert built.refused[1].reason == "spec.template: required"


def test_daemonset_pods_get_their_namespaces_limit_range_defaults() -> None:
    def daemonset(name: str, namespace: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace},
                "spec": {"template": {"spec": {"containers": [{"name": "a"}],
                                               "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "2"}}}]}}}}

    def limit_range(namespace: str, default_request: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": "defaults", "namespace": namespace},
                "spec": {"limits": [{"type": "Container", "defaultRequest": default_request}]}}

    snapshot = snapshot_of(daemonsets=[daemonset("agent", "kube-system"), daemonset("other", "monitoring")],
                           limit_ranges=[limit_range("kube-system", {"cpu": "200m", "memory": "100Mi"})],
                           provisioners=[provisioner()])
    built = build(snapshot, [])
    # agent: its container 200m/100Mi; its init container its 2-cpu limit and 100Mi: max is 2 cpu, 100Mi
    assert {p.name: p.requests for p in built.input.daemonsets} == {
        "agent": Resources({"cpu": 2000, "memory": 100 * 2**20, "pods": 1}),
        "other": Resources({"cpu": 2000, "pods": 1})}
    broken = snapshot_of(daemonsets=[daemonset("agent", "kube-system")],
                         limit_ranges=[limit_range("kube-system", {"cpu": "much"})], provisioners=[provisioner()])
    refused = build(broken, []).refused
    assert [(r.kind, r.obj["metadata"]["name"]) for r in refused] == [("DaemonSet", "agent")]
    assert refused[0].reason.startswith(
        "LimitRange kube-system/defaults: spec.limits[0].defaultRequest.cpu: invalid quantity 'much'")


def test_provisionable_pods_leave_out_pods_capacity_is_on_its_way_for() -> None:
    waiting = [pod("in-flight"), pod("a-nominated"), pod("b-displaced"), pod("new")]
    snapshot = snapshot_of(nodes=[node("ip-1", cpu="2", nominations=nominations("a-nominated", "b-displaced"))],
                           pods=[*waiting, pod("running", node_name="ip-1")], provisioners=[provisioner()])
    views = NodeViews().nodes(snapshot)
    # ip-1 has 2 cpu, 1 used: "b-displaced" no longer fits beside "a-nominated" (UID order) and needs a node
    assert covered_pods(views, snapshot, NOW, {"in-flight"}) == {"in-flight", "a-nominated"}
    chosen = provisionable_pods(snapshot, views, NOW, in_flight={"in-flight"})
    assert [p["metadata"]["uid"] for p in chosen] == ["b-displaced", "new"]
    manifest = {"metadata": {"name": "m", "uid": "m"}, "spec": {"containers": [{"name": "c"}]}}
    assert provisionable_pods(snapshot, views, NOW, candidates=[manifest]) == []
    assert provisionable_pods(snapshot, views, NOW, candidates=[manifest], require_unschedulable=False) == [manifest]


def test_candidate_nodes_drop_full_nodes_unless_a_pod_counts_pods_elsewhere() -> None:
    snapshot = snapshot_of(nodes=[node("roomy"), node("full", cpu="1")],
                           pods=[pod("busy", cpu="1", node_name="full")], provisioners=[provisioner()])
    built = build(snapshot, [pod("p", cpu="500m")])
    assert [n.name for n in built.input.nodes] == ["roomy"]
    assert [n.name for n in candidate_nodes([*built.input.nodes], [])] == ["roomy"]
    spread = pod("s", cpu="500m")
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "s"}}}]
    assert sorted(n.name for n in build(snapshot, [spread]).input.nodes) == ["full", "roomy"]
