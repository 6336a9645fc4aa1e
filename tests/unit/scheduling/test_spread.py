"""Topology spread as kube-scheduler's PodTopologySpread computes it: exact plans.

Every case goes through the production wiring: Node and Pod manifests, the shared node views,
the one solver-input builder, the solver. Existing nodes are domains with their pods counted
(for the hostname key too); the minimum is over the domains the constraint admits
(``nodeAffinityPolicy``, ``nodeTaintsPolicy``), 0 under ``minDomains``; a pod kube-scheduler
would bind to an existing node within ``maxSkew`` gets no new node, and new nodes are no more
than ``maxSkew`` needs whatever order they register in.

Units: cpu quantities as in manifests; every web pod requests 500m, so a node with allocatable
cpu ``c`` holds ``c / 500m`` of them; m5.xlarge (3820m allocatable) holds 7.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.model import nominations as nom
from provisioner.model.labels import NOMINATIONS_ANNOTATION, ZONE
from provisioner.model.resources import Resources
from provisioner.scheduling.pods import pod_from_manifest
from provisioner.scheduling.solver import Plan, solve
from provisioner.state.cluster import snapshot_of
from provisioner.state.nodes import NodeViews
from provisioner.state.solverinput import build_solver_input
from tests.builders.catalog import instance_type
from tests.builders.nodes import node_manifest
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOSTNAME_KEY = "kubernetes.io/hostname"
A, B, C = "ap-south-1a", "ap-south-1b", "ap-south-1c"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))
#: The only instance type, so the plans below depend on spread alone, not on prices.
M5_XLARGE = instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)
WEB = {"app": "web"}


def tsc(key: str = HOSTNAME_KEY, max_skew: int = 1, when: str = "DoNotSchedule", selector: Any = WEB,
        **fields: Any) -> dict[str, Any]:
    """One topologySpreadConstraints item; ``selector`` None leaves labelSelector out."""
    item: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **fields}
    if selector is not None:
        item["labelSelector"] = {"matchLabels": selector}
    return item


def web(name: str, *constraints: dict[str, Any], cpu: str = "500m", labels: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    """A pending web pod with ``constraints``."""
    body = dict(spec)
    if constraints:
        body["topologySpreadConstraints"] = list(constraints)
    return manifest(name, cpu=cpu, labels=labels if labels is not None else dict(WEB), spec=body)


def pending(count: int, *constraints: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    return [web(f"w{i}", *constraints, **kw) for i in range(count)]


class Cluster:
    """Existing nodes and the pods bound to them, as manifests."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.bound: list[dict[str, Any]] = []

    def node(self, name: str, zone: str = A, *, web_pods: int = 0, room: int = 0, other: bool = False,
             labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
             ready: bool = True, extra: dict[str, Any] | None = None) -> Cluster:
        """A node in ``zone`` running ``web_pods`` web pods with room for ``room`` more (500m each).

        ``other``: a 1-CPU pod of another app fills the rest (a node that is a domain but takes no pod).
        """
        cpu_milli = 500 * (web_pods + room) + (1000 if other else 0)
        node = node_manifest(name, provisioner="default", labels={ZONE: zone, **(labels or {})},
                             allocatable={"cpu": f"{cpu_milli}m", "memory": "16Gi", "pods": "110"},
                             taints=taints, ready=ready)
        node["metadata"].update(extra or {})
        self.nodes.append(node)
        for i in range(web_pods):
            self.bound.append(manifest(f"{name}-web-{i}", cpu="500m", labels=dict(WEB), spec={"nodeName": name},
                                       status={"phase": "Running"}))
        if other:
            self.bound.append(manifest(f"{name}-other", cpu="1", labels={"app": "other"}, spec={"nodeName": name},
                                       status={"phase": "Running"}))
        return self

    def plan(self, pods: list[dict[str, Any]], prov: Any = None, others: list[dict[str, Any]] | None = None,
             **options: Any) -> Plan:
        """The plan for ``pods`` (``others``: more pods in the cluster; ``options``: SolverInput fields to set)."""
        prov = prov or provisioner(requirements=AMD64_OD)
        snapshot = snapshot_of(nodes=self.nodes, pods=self.bound + pods + (others or []), provisioners=[prov])
        built = build_solver_input(snapshot, NodeViews().nodes(snapshot), pods, {prov.name: [M5_XLARGE]}, now=NOW)
        assert built.refused == ()
        return solve(replace(built.input, **options))


def on_existing(plan: Plan) -> dict[str, list[str]]:
    return {e.node: sorted(p.name for p in e.pods) for e in plan.existing}


def new_sizes(plan: Plan) -> list[int]:
    return sorted(len(n.pods) for n in plan.new_nodes)


def new_zones(plan: Plan) -> list[tuple[str, list[str]]]:
    return sorted((n.labels[ZONE], sorted(p.name for p in n.pods)) for n in plan.new_nodes)


# ----------------------------------------------------------------------------- hostname, existing nodes
def test_hostname_spread_fills_existing_nodes_within_max_skew_and_launches_nothing():
    # three nodes with one web pod each and room for three more: the minimum is 1, so each
    # node takes pods up to 2, then 3 (Karpenter takes the minimum as 0 and launches 6 nodes)
    cluster = Cluster().node("n1", room=3, web_pods=1).node("n2", room=3, web_pods=1).node("n3", room=3, web_pods=1)
    plan = cluster.plan(pending(6, tsc()))
    assert plan.new_nodes == ()
    assert on_existing(plan) == {"n1": ["w0", "w3"], "n2": ["w1", "w4"], "n3": ["w2", "w5"]}
    assert plan.unschedulable == ()


def test_hostname_spread_stops_at_max_skew_over_the_least_loaded_node():
    # n2 has no web pod: n1 (1) may not take another yet (1 + 1 - 0 > 1); n2 takes w0, then
    # n1 takes w1 (1 + 1 - 1); w2 would make n1 3 against n2's 1, and n2 is full: a new node
    cluster = Cluster().node("n1", web_pods=1, room=5).node("n2", room=1)
    plan = cluster.plan(pending(3, tsc()))
    assert on_existing(plan) == {"n1": ["w1"], "n2": ["w0"]}
    assert new_sizes(plan) == [1]


def test_hostname_max_skew_2_and_3_launch_no_more_nodes_than_needed():
    # two full nodes with two web pods each: a new node may hold up to 2 + maxSkew of them
    full = Cluster().node("n1", web_pods=2).node("n2", web_pods=2)
    assert new_sizes(full.plan(pending(6, tsc(max_skew=2)))) == [2, 4]
    assert new_sizes(full.plan(pending(9, tsc(max_skew=3)))) == [4, 5]
    # with a node that has none (any node is a domain: taints are ignored by default), the
    # minimum stays 0 and every new node holds maxSkew
    with_empty = Cluster().node("n1", web_pods=2).node("n2", web_pods=2).node("sys", other=True)
    assert new_sizes(with_empty.plan(pending(6, tsc(max_skew=2)))) == [2, 2, 2]
    assert new_sizes(with_empty.plan(pending(9, tsc(max_skew=3)))) == [3, 3, 3]


def test_hostname_spread_alone_on_new_nodes_stacks_as_kube_scheduler_would():
    # no node is a domain yet: one new node is a single domain, whose skew is always 0
    assert new_sizes(Cluster().plan(pending(5, tsc()))) == [5]
    # minDomains 3: the minimum is 0 until there are three domains, then they fill evenly
    assert new_sizes(Cluster().plan(pending(6, tsc(minDomains=3)))) == [2, 2, 2]


def test_hostname_spread_on_new_nodes_holds_whatever_order_they_register_in():
    # 10 pods, 7 per node: 7 + 3 would strand a pod if the node of 3 registered first
    # (7th pod: 6 + 1 - 3 > 1); the plan spreads them 5 + 5, valid in either order
    assert new_sizes(Cluster().plan(pending(10, tsc()))) == [5, 5]
    assert new_sizes(Cluster().plan(pending(11, tsc()))) == [5, 6]
    # 7 + 6 is kept as it is (6 is within 1 of 7)
    assert new_sizes(Cluster().plan(pending(13, tsc()))) == [6, 7]


def test_other_pending_workloads_make_every_new_node_hold_max_skew():
    # another workload's new node is a domain without web pods (the minimum may end at 0)
    others = [manifest("batch", cpu="3500m", labels={"app": "batch"})]
    plan = Cluster().plan(pending(3, tsc()) + others)
    assert sorted(sorted(p.name for p in n.pods) for n in plan.new_nodes) == [["batch"], ["w0"], ["w1"], ["w2"]]


# ----------------------------------------------------------------------------- zones
def test_existing_zones_with_room_take_the_pods_though_a_zone_has_no_node():
    # kube-scheduler counts zones that have nodes: a and b (1 each); zone c has none yet
    cluster = Cluster().node("a1", A, web_pods=1, room=2).node("b1", B, web_pods=1, room=2)
    plan = cluster.plan(pending(2, tsc(ZONE)))
    assert plan.new_nodes == ()
    assert on_existing(plan) == {"a1": ["w0"], "b1": ["w1"]}


def test_zone_spread_with_an_existing_zone_ahead():
    # a: 3 (full), b: 1 with room for one. w0 goes to b now (1 + 1 - 1); then new nodes count
    # zone c (offered, no pod) as 0, so w1 and w2 go to c
    cluster = Cluster().node("a1", A, web_pods=3).node("b1", B, web_pods=1, room=1)
    plan = cluster.plan(pending(3, tsc(ZONE)))
    assert on_existing(plan) == {"b1": ["w0"]}
    assert new_zones(plan) == [(C, ["w1", "w2"])]


def test_min_domains_for_zones():
    cluster = Cluster().node("a1", A, web_pods=1, room=2).node("b1", B, web_pods=1, room=2)
    # two zones with nodes, fewer than 3: the minimum is 0, existing nodes refuse; a node in c
    # makes the third domain, and then holds both
    plan = cluster.plan(pending(2, tsc(ZONE, minDomains=3)))
    assert on_existing(plan) == {}
    assert new_zones(plan) == [(C, ["w0", "w1"])]
    # with subnets in a and b only, three domains can never exist: nothing may be placed
    plan = cluster.plan(pending(2, tsc(ZONE, minDomains=3)), zones={"default": frozenset({A, B})})
    assert plan.new_nodes == () and on_existing(plan) == {}
    assert {e.reason for e in plan.unschedulable} == {
        "provisioner default: would violate topology spread on topology.kubernetes.io/zone"}


# ----------------------------------------------------------------------------- node inclusion policies
def test_node_affinity_policy_honor_and_ignore():
    pool = provisioner(requirements=AMD64_OD, labels=[("pool", "web")])
    cluster = Cluster().node("sys", other=True).node("w1", web_pods=1, room=2, labels={"pool": "web"})
    selector = {"nodeSelector": {"pool": "web"}}
    # Honor (default): only nodes the pod's node selector matches are domains: w1 alone, so it
    # takes pods up to its room; the third gets a new node
    plan = cluster.plan(pending(3, tsc(), **selector), prov=pool)
    assert on_existing(plan) == {"w1": ["w0", "w1"]} and new_sizes(plan) == [1]
    # Ignore: sys (no web pod) is a domain too, the minimum is 0: w1 is at maxSkew already
    plan = cluster.plan(pending(3, tsc(nodeAffinityPolicy="Ignore"), **selector), prov=pool)
    assert on_existing(plan) == {} and new_sizes(plan) == [1, 1, 1]


def test_node_taints_policy_honor_and_ignore():
    cluster = Cluster().node("gpu", room=4, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    cluster.node("w1", web_pods=1, room=2)
    # Ignore (default): the tainted node is a domain with no web pod: the minimum is 0
    plan = cluster.plan(pending(3, tsc()))
    assert on_existing(plan) == {} and new_sizes(plan) == [1, 1, 1]
    # Honor: a node whose taint the pod does not tolerate is no domain: w1 alone
    plan = cluster.plan(pending(3, tsc(nodeTaintsPolicy="Honor")))
    assert on_existing(plan) == {"w1": ["w0", "w1"]} and new_sizes(plan) == [1]
    # a tolerated taint keeps the node a domain under Honor
    tolerant = {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    plan = cluster.plan(pending(1, tsc(nodeTaintsPolicy="Honor"), **tolerant))
    assert on_existing(plan) == {"gpu": ["w0"]}


# ----------------------------------------------------------------------------- selectors, soft constraints
def test_a_constraint_without_label_selector_counts_no_pod():
    cluster = Cluster().node("sys", other=True)
    assert new_sizes(cluster.plan(pending(3, tsc(selector=None)))) == [3]
    # matchLabelKeys alone select the pods with the pod's values of those keys
    by_revision = tsc(selector=None, matchLabelKeys=["rev"])
    assert new_sizes(cluster.plan(pending(3, by_revision, labels={"app": "web", "rev": "1"}))) == [1, 1, 1]


def test_schedule_anyway_never_keeps_a_pod_off_an_existing_node():
    # kube-scheduler only scores ScheduleAnyway: w1 (3 web pods, minimum 0) still takes w0
    cluster = Cluster().node("sys", other=True).node("w1", web_pods=3, room=1)
    plan = cluster.plan(pending(3, tsc(when="ScheduleAnyway")))
    assert on_existing(plan) == {"w1": ["w0"]}
    # on new nodes it is held as a preference: one each
    assert new_sizes(plan) == [1, 1]


def test_schedule_anyway_is_held_then_relaxed_when_nothing_fits():
    # only zone a may get nodes; b has a full node without web pods, so a may hold one web pod
    cluster = Cluster().node("b1", B, other=True)
    only_a = provisioner(requirements=(("topology.kubernetes.io/zone", "In", (A,)),) + AMD64_OD)
    soft = cluster.plan(pending(2, tsc(ZONE, when="ScheduleAnyway")), prov=only_a)
    assert new_zones(soft) == [(A, ["w0", "w1"])] and soft.unschedulable == ()
    hard = cluster.plan(pending(2, tsc(ZONE)), prov=only_a)
    assert new_zones(hard) == [(A, ["w0"])] and [e.pod.name for e in hard.unschedulable] == ["w1"]


# ----------------------------------------------------------------------------- unconstrained matching pods
def test_pods_the_selector_matches_count_though_they_carry_no_constraint():
    plain = [web(f"plain{i}", cpu="1") for i in range(2)]  # web pods without a constraint, placed first
    # the plain pods pin their node's zone (a: 2): maxSkew 1 keeps the spread pod off it
    plan = Cluster().plan(plain + [web("s0", tsc(ZONE), cpu="100m")])
    assert new_zones(plan) == [(A, ["plain0", "plain1"]), (B, ["s0"])]
    # maxSkew 3: s0 joins them (a: 3); s1 would make a 4 against 0: zone b
    plan = Cluster().plan(plain + [web(f"s{i}", tsc(ZONE, max_skew=3), cpu="100m") for i in range(2)])
    assert new_zones(plan) == [(A, ["plain0", "plain1", "s0"]), (B, ["s1"])]


# ----------------------------------------------------------------------------- nominations
def test_pods_nominated_to_a_launching_node_count_there():
    # "launching" (not Ready) is reserved for two web pods; w1 has one web pod and room
    reserved = nom.Nominations(deadline=NOW + 300, pods={
        f"uid-n{i}": nom.NominatedPod(f"default/n{i}", Resources({"cpu": 500})) for i in range(2)})
    cluster = Cluster().node("launching", room=2, ready=False,
                             extra={"annotations": {NOMINATIONS_ANNOTATION: nom.encode(reserved)}})
    cluster.node("w1", web_pods=1, room=2)
    nominated = [web(f"n{i}", tsc()) for i in range(2)]
    # counted as the launching node's pods, the minimum is 1: w1 takes the new pod
    plan = cluster.plan([web("x", tsc())], others=nominated)
    assert plan.new_nodes == () and on_existing(plan) == {"w1": ["x"]}


# ----------------------------------------------------------------------------- any registration order
def bind_all(candidates: list[tuple[Any, str]], where: dict[str, dict[str, Any]], registered: list[str],
             rng: random.Random) -> list[tuple[Any, str]]:
    """kube-scheduler steered to the planned node: bind what PodTopologySpread allows, retrying until nothing moves.

    ``where``: node name -> {"zone", "pods": [Pod]}; ``registered``: the nodes that exist.
    Returns the pods left pending.
    """
    def allowed(pod: Any, target: str) -> bool:
        for c in pod.topology_spread:
            if not c.hard:
                continue
            counts: dict[str, int] = {}
            for name in registered:
                domain = name if c.topology_key == HOSTNAME_KEY else where[name]["zone"]
                counts[domain] = counts.get(domain, 0) + sum(
                    1 for other in where[name]["pods"] if other.namespace == pod.namespace and c.selector.matches(other.labels))
            minimum = 0 if len(counts) < c.min_domains else min(counts.values())
            domain = target if c.topology_key == HOSTNAME_KEY else where[target]["zone"]
            if counts[domain] + (1 if c.selector.matches(pod.labels) else 0) - minimum > c.max_skew:
                return False
        return True

    left = list(candidates)
    moved = True
    while moved:
        moved = False
        rng.shuffle(left)
        for item in list(left):
            pod, target = item
            if target in registered and allowed(pod, target):
                where[target]["pods"].append(pod)
                left.remove(item)
                moved = True
    return left


@st.composite
def spread_workload(draw: Any) -> tuple[Cluster, list[dict[str, Any]]]:
    cluster = Cluster()
    for i in range(draw(st.integers(0, 3))):
        cluster.node(f"n{i}", draw(st.sampled_from([A, B, C])), web_pods=draw(st.integers(0, 3)),
                     room=draw(st.integers(0, 3)))
    pods: list[dict[str, Any]] = []
    for group, labels in (("w", dict(WEB)), ("v", {"app": "api"})):
        count = draw(st.integers(0, 12 if group == "w" else 6))
        key = draw(st.sampled_from([HOSTNAME_KEY, ZONE]))
        extra: dict[str, Any] = {}
        if draw(st.booleans()):
            extra["minDomains"] = draw(st.integers(2, 4))
        constraint = tsc(key, max_skew=draw(st.integers(1, 3)), selector=labels, **extra)
        pods += [web(f"{group}{i}", constraint, labels=labels) for i in range(count)]
    pods += [manifest(f"plain{i}", cpu="1", labels={"app": "plain"}) for i in range(draw(st.integers(0, 2)))]
    return cluster, pods


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_workload(), st.randoms(use_true_random=False))
def test_every_planned_pod_binds_whatever_order_the_new_nodes_register_in(case, rng):
    cluster, pods = case
    plan = cluster.plan(pods)
    read = {p.name: p for p in (pod_from_manifest(m) for m in cluster.bound)}
    where: dict[str, dict[str, Any]] = {
        n["metadata"]["name"]: {"zone": n["metadata"]["labels"][ZONE], "pods": []} for n in cluster.nodes}
    for bound in read.values():
        where[bound.node_name]["pods"].append(bound)  # type: ignore[index]
    registered = list(where)
    now = [(p, e.node) for e in plan.existing for p in e.pods]
    assert bind_all(now, where, registered, rng) == [], "a pod planned for an existing node is refused there"
    later = []
    for i, node in enumerate(plan.new_nodes):
        where[f"new{i}"] = {"zone": node.labels.get(ZONE, node.offering.zone), "pods": []}
        later += [(p, f"new{i}") for p in node.pods]
    left = later
    for name in rng.sample([f"new{i}" for i in range(len(plan.new_nodes))], len(plan.new_nodes)):
        registered.append(name)
        left = bind_all(left, where, registered, rng)
    assert left == [], f"stranded: {[(p.name, t) for p, t in left]}"
