"""Preferences never keep a pod off an existing node; they only rank the existing nodes that take it.

kube-scheduler filters nodes on a pod's required constraints and only scores its preferences
(preferred pod affinity and anti-affinity, PreferNoSchedule taints, preferred node affinity,
ScheduleAnyway spread), so a pod an existing node can take binds there and a new node launched
for a preference would stay empty. Among the existing nodes that take it, the plan puts it where
kube-scheduler's TaintToleration (weight 3), NodeAffinity (2) and InterPodAffinity (2) scores,
normalised as the plugins normalise them, with the resource scores and the extender's (weight 5),
sum highest (``tests/unit/scheduling/test_existing_resource_scores.py``: the resource scores).
Every case goes through Node and Pod manifests, the shared node views and the one solver-input builder.

Units: cpu quantities as in manifests; m5.xlarge allocatable 3820m.
"""

from __future__ import annotations

from typing import Any

from provisioner.model.labels import ZONE
from tests.builders.catalog import instance_type
from tests.builders.nodes import node_manifest
from tests.builders.plans import bound, on_existing, plan_of
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

HOSTNAME = "kubernetes.io/hostname"
A, B = "ap-south-1a", "ap-south-1b"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))
M5_XLARGE = instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)
PROVISIONER = provisioner(requirements=AMD64_OD)
TYPES = {"default": [M5_XLARGE]}


def node(name: str, zone: str = A, cpu: str = "2", taints: list[dict[str, str]] | None = None,
         labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    """A node of the default Provisioner in ``zone`` with ``cpu`` allocatable."""
    return node_manifest(name, provisioner="default", labels={ZONE: zone, HOSTNAME: name, **(labels or {})},
                         allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110"}, taints=taints, ready=ready)


def pod_term(weight: int, key: str, app: str) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}}


def preferring(name: str, *, affinity: list[dict[str, Any]] | None = None,
               anti: list[dict[str, Any]] | None = None, node_terms: list[dict[str, Any]] | None = None,
               cpu: str = "1", **spec: Any) -> dict[str, Any]:
    """A pending web pod with preferred pod affinity / anti-affinity / node affinity terms."""
    rules: dict[str, Any] = {}
    if affinity:
        rules["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        rules["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": anti}
    if node_terms:
        rules["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": node_terms}
    return manifest(name, cpu=cpu, labels={"app": "web"}, spec={"affinity": rules, **spec})


def plan(pending: list[dict[str, Any]], nodes: list[dict[str, Any]], running: list[dict[str, Any]] = ()) -> Any:
    return plan_of(pending, [PROVISIONER], TYPES, nodes=nodes, running=list(running))


SOFT_TAINT = {"key": "spare", "value": "", "effect": "PreferNoSchedule"}


# ----------------------------------------------------------------------------- never kept off an existing node
def test_preferred_pod_anti_affinity_does_not_keep_a_pod_off_the_only_node_with_room():
    # n1 runs a web pod and has room for one more: kube-scheduler binds the second web pod
    # there (its anti-affinity is only a preference); no node is launched for it
    result = plan([preferring("w1", anti=[pod_term(100, HOSTNAME, "web")])], [node("n1")],
                  [bound("w0", "n1", cpu="1", labels={"app": "web"})])
    assert on_existing(result) == {"n1": ["w1"]}
    assert result.new_nodes == () and result.unschedulable == ()


def test_preferred_pod_affinity_does_not_keep_a_pod_off_nodes_outside_the_preferred_zone():
    # the db pod's node in 1b is full; kube-scheduler binds the pod to n-a in 1a rather than wait
    result = plan([preferring("w", affinity=[pod_term(100, ZONE, "db")])],
                  [node("n-a", A), node("n-b", B, cpu="500m")],
                  [bound("db", "n-b", cpu="500m", labels={"app": "db"})])
    assert on_existing(result) == {"n-a": ["w"]}
    assert result.new_nodes == ()


def test_prefer_no_schedule_taint_does_not_keep_a_pod_off_an_existing_node():
    result = plan([preferring("w")], [node("n1", taints=[SOFT_TAINT])])
    assert on_existing(result) == {"n1": ["w"]}
    assert result.new_nodes == ()


def test_preferences_do_not_keep_a_pod_off_an_in_flight_node():
    # launching: no Ready condition and Groupless' startup taint, which goes away
    launching = node("n1", ready=False, taints=[{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}, SOFT_TAINT])
    result = plan([preferring("w1", anti=[pod_term(100, HOSTNAME, "web")])], [launching],
                  [bound("w0", "n1", cpu="1", labels={"app": "web"})])
    assert on_existing(result) == {"n1": ["w1"]}
    assert result.new_nodes == ()


def test_preferences_still_shape_the_new_nodes():
    # no existing room: the preferred anti-affinity gives each pod a node of its own
    result = plan([preferring(f"w{i}", anti=[pod_term(100, HOSTNAME, "web")]) for i in range(3)], [])
    assert sorted(len(n.pods) for n in result.new_nodes) == [1, 1, 1]


# ----------------------------------------------------------------------------- which existing node
def test_the_node_without_a_prefer_no_schedule_taint_wins():
    # n-a is tried first, but TaintToleration scores n-b 100 and n-a 0
    result = plan([preferring("w")], [node("n-a", taints=[SOFT_TAINT]), node("n-b")])
    assert on_existing(result) == {"n-b": ["w"]}
    # a pod tolerating the taint scores both alike: the first tried
    tolerant = preferring("t", tolerations=[{"key": "spare", "operator": "Exists", "effect": "PreferNoSchedule"}])
    assert on_existing(plan([tolerant], [node("n-a", taints=[SOFT_TAINT]), node("n-b")])) == {"n-a": ["t"]}


def test_preferred_pod_affinity_ranks_nodes_by_the_selected_pods_in_their_domain():
    # db runs in 1b on a full node: n-b2 shares its zone, n-a (tried first) does not
    result = plan([preferring("w", affinity=[pod_term(50, ZONE, "db")])],
                  [node("n-a", A), node("n-b1", B, cpu="500m"), node("n-b2", B)],
                  [bound("db", "n-b1", cpu="500m", labels={"app": "db"})])
    assert on_existing(result) == {"n-b2": ["w"]}


def test_preferred_pod_anti_affinity_ranks_nodes_by_the_selected_pods_on_them():
    result = plan([preferring("w1", anti=[pod_term(100, HOSTNAME, "web")])], [node("n1"), node("n2")],
                  [bound("w0", "n1", cpu="500m", labels={"app": "web"})])
    assert on_existing(result) == {"n2": ["w1"]}


def test_scores_are_summed_with_kube_schedulers_weights():
    # n-a meets the preferred node affinity term (NodeAffinity 100 x 2 = 200) but bears a
    # PreferNoSchedule taint (TaintToleration 0); n-b meets no term (0) and has no taint
    # (100 x 3 = 300). The extender scores n-b, outside NodeAffinity's top tier, 0 and n-a by
    # its packing: with 100m of 2 cores taken, 1 (x 50). The resource scores are the same on
    # both: 300 beats 250 and kube-scheduler binds to n-b, which a node affinity score alone would not
    term = {"weight": 100, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
    nodes = [node("n-a", labels={"disk": "ssd"}, taints=[SOFT_TAINT]), node("n-b")]
    assert on_existing(plan([preferring("w", node_terms=[term], cpu="100m")], nodes)) == {"n-b": ["w"]}
    # a pod taking half of n-a's cpu: the extender's packing score 3 (x 50) gives n-a 350
    assert on_existing(plan([preferring("w", node_terms=[term])], nodes)) == {"n-a": ["w"]}
    # without the taint, the node affinity term decides
    nodes = [node("n-b"), node("n-c", labels={"disk": "ssd"})]
    assert on_existing(plan([preferring("w", node_terms=[term])], nodes)) == {"n-c": ["w"]}
