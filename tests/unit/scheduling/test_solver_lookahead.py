"""Runs of identical pods: a new node opened for one is priced for the run still to place.

A catalog shaped like the kwok one for 900m / 3100Mi pods (prices illustrative, USD/hour): one
pod alone fits ``a.small`` ($0.012); two need ``a.medium`` ($0.0246, more than two smalls); eight
fit ``a.2xlarge`` ($0.0931, $0.0116375 a pod) and seventeen ``a.4xlarge`` ($0.186, $0.0109412 a
pod). Growing a node one pod at a time never pays; a node for 8 or more such pods does.
"""

from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import instance_type
from tests.builders.pods import pod
from tests.builders.provisioners import provisioner

SMALL = instance_type("a.small", "arm64", 2000, 4096, 17, 1930, 3400, 0.012)
MEDIUM = instance_type("a.medium", "arm64", 4000, 8192, 29, 3860, 7000, 0.0246)
XLARGE = instance_type("a.xlarge", "arm64", 8000, 16384, 58, 7800, 14500, 0.049)
XLARGE2 = instance_type("a.2xlarge", "arm64", 8000, 32768, 58, 7810, 28843, 0.0931)
XLARGE4 = instance_type("a.4xlarge", "arm64", 16000, 65536, 58, 15890, 57000, 0.186)
CATALOG = [SMALL, MEDIUM, XLARGE, XLARGE2, XLARGE4]


def identical(count, prefix="p", labels=None, spec=None):
    return [pod(f"{prefix}{i:02d}", cpu="900m", memory="3100Mi", labels=labels or {"app": "small"}, spec=spec)
            for i in range(count)]


def run(pods, types=CATALOG):
    prov = provisioner()
    return solve(SolverInput(pods=pods, provisioners=[prov], instance_types={prov.name: types}))


def layout(plan):
    """(instance type, pod names) per new node, in the order planned."""
    return [(n.instance_type.name, [p.name for p in n.pods]) for n in plan.new_nodes]


def test_a_run_of_twenty_fills_the_node_cheapest_per_pod_and_the_rest_go_alone():
    plan = run(identical(20))
    assert layout(plan) == [("a.4xlarge", [f"p{i:02d}" for i in range(17)]),
                            ("a.small", ["p17"]), ("a.small", ["p18"]), ("a.small", ["p19"])]
    assert round(plan.total_price, 6) == 0.222  # alone: 20 x 0.012 = 0.24
    assert plan.unschedulable == ()


def test_a_run_at_the_break_even_takes_one_larger_node():
    plan = run(identical(8))
    assert layout(plan) == [("a.2xlarge", [f"p{i:02d}" for i in range(8)])]
    assert plan.total_price == 0.0931  # alone: 8 x 0.012 = 0.096


def test_a_run_below_the_break_even_keeps_a_node_each():
    plan = run(identical(7))
    assert layout(plan) == [("a.small", [f"p{i:02d}"]) for i in range(7)]
    assert round(plan.total_price, 6) == 0.084


def test_the_pods_resource_counts_in_how_many_a_node_holds():
    # 10 pods at most on the 4xlarge: $0.0186 a pod, worse than alone; the 2xlarge's 8 win twice
    xlarge4 = instance_type("a.4xlarge", "arm64", 16000, 65536, 10, 15890, 57000, 0.186)
    plan = run(identical(20), [SMALL, MEDIUM, XLARGE, XLARGE2, xlarge4])
    assert layout(plan) == [("a.2xlarge", [f"p{i:02d}" for i in range(8)]),
                            ("a.2xlarge", [f"p{i:02d}" for i in range(8, 16)]),
                            ("a.small", ["p16"]), ("a.small", ["p17"]), ("a.small", ["p18"]), ("a.small", ["p19"])]
    assert round(plan.total_price, 6) == 0.2342


def test_equal_price_a_pod_goes_to_the_smaller_node():
    # 16 pods on a $0.1862 type cost what 8 on the 2xlarge cost a pod: two 2xlarge
    double = instance_type("a.double", "arm64", 16000, 65536, 58, 15890, 57686, 0.1862)
    plan = run(identical(16), [SMALL, MEDIUM, XLARGE, XLARGE2, double])
    assert layout(plan) == [("a.2xlarge", [f"p{i:02d}" for i in range(8)]),
                            ("a.2xlarge", [f"p{i:02d}" for i in range(8, 16)])]


def test_another_pod_grows_the_node_by_the_marginal_rule_only():
    # "q" has the run's requests but another label (another shape) and comes after p07 in the
    # queue: on the 2xlarge holding p00-p07 it would raise the price to the 4xlarge's, by more
    # than a node of its own, so it goes alone; the run then fills the 4xlarge
    other = pod("p07z", cpu="900m", memory="3100Mi", labels={"app": "other"})
    plan = run([*identical(20), other])
    assert layout(plan) == [("a.4xlarge", [f"p{i:02d}" for i in range(17)]), ("a.small", ["p07z"]),
                            ("a.small", ["p17"]), ("a.small", ["p18"]), ("a.small", ["p19"])]
    assert round(plan.total_price, 6) == 0.234


def test_smaller_pods_that_fill_the_room_a_pod_leaves_keep_the_marginal_rule():
    # each a.small keeps 1030m / 300Mi beside a 900m / 3100Mi pod: room for three 100m / 100Mi pods
    tiny = [pod(f"t{i:02d}", cpu="100m", memory="100Mi", labels={"app": "tiny"}) for i in range(24)]
    plan = run([*identical(8), *tiny])
    assert [n.instance_type.name for n in plan.new_nodes] == ["a.small"] * 8
    assert [len(n.pods) for n in plan.new_nodes] == [4] * 8
    assert round(plan.total_price, 6) == 0.096


def spread(key):
    return {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "small"}}}]}


def test_pods_a_topology_constraint_concerns_keep_a_node_each():
    # their constraints spread a run over nodes or zones: a node grown for the run but given a
    # part of it (two pods on an a.medium) would cost more than nodes of their own
    anti_affinity = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "small"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    for spec in (anti_affinity, spread("kubernetes.io/hostname"), spread("topology.kubernetes.io/zone")):
        plan = run(identical(20, spec=spec))
        assert [(name, len(pods)) for name, pods in layout(plan)] == [("a.small", 1)] * 20
        assert plan.unschedulable == ()
        assert round(plan.total_price, 6) == 0.24


def test_pods_another_pod_counts_keep_a_node_each():
    # a zone spread of other pods selects the run's label: the run keeps the marginal rule
    counting = pod("c", cpu="1500m", memory="3300Mi", labels={"app": "small"}, spec={"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "small"}}}]})
    plan = run([*identical(10, labels={"app": "small", "tier": "web"}), counting])
    assert [(name, len(pods)) for name, pods in layout(plan)] == [("a.small", 1)] * 11


def test_a_node_grown_for_a_run_stays_within_the_provisioners_limits():
    # cpu 16: one a.4xlarge (16 vCPU) holds 17 pods; 8 a.small (2 vCPU each) would hold 8
    prov = provisioner(limits={"cpu": "16"})
    plan = solve(SolverInput(pods=identical(20), provisioners=[prov], instance_types={prov.name: CATALOG}))
    assert layout(plan) == [("a.4xlarge", [f"p{i:02d}" for i in range(17)])]
    assert [e.pod.name for e in plan.unschedulable] == ["p17", "p18", "p19"]
    assert plan.unschedulable[0].reason == (
        "provisioner default: would exceed limits of provisioner default (cpu: 16 in use or planned of 16; "
        "the smallest instance type that fits the pod adds cpu: 2)")
