"""Preferred node affinity as kube-scheduler scores it: the sum of the weights of the terms a node meets.

New nodes hold the set of terms with the highest total weight some node can meet, and relax
lighter terms before heavier ones; existing nodes take a pod by its required constraints alone
and, among those that take it, the one with the highest score wins. Exact plans, over the
solver catalog (``tests/builders/catalog.py``).
"""

from __future__ import annotations

from provisioner.model.resources import Resources
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import pod_from_manifest
from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import solver_catalog
from tests.builders.pods import manifest, pod
from tests.builders.provisioners import provisioner

ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))


def run(pods, provisioners=None, **kw):
    provisioners = provisioners or [provisioner(requirements=AMD64_OD)]
    return solve(SolverInput(pods=pods, provisioners=provisioners,
                             instance_types={p.name: solver_catalog() for p in provisioners}, **kw))


def term(weight, key, operator, *values):
    expression = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"weight": weight, "preference": {"matchExpressions": [expression]}}


def preferring(name, *terms, cpu="1", labels=None, spec=None):
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}
    return pod(name, cpu=cpu, labels=labels, spec={"affinity": affinity, **(spec or {})})


def nodes(plan):
    """Each new node as (zone of its offering, its options, its pods)."""
    return [(n.offering.zone, [t.name for t in n.instance_type_options], [p.name for p in n.pods])
            for n in plan.new_nodes]


def existing(name, zone, instance_type="m5.xlarge", in_flight=False):
    """A node with 3 CPU free, in ``zone``, of ``instance_type``."""
    return ClusterNode(name=name, labels={ZONE: zone, INSTANCE_TYPE: instance_type, "kubernetes.io/hostname": name},
                       allocatable=Resources({"cpu": 4000, "memory": 16 * 2**30, "pods": 58}),
                       requested=Resources({"cpu": 1000, "pods": 1}), in_flight=in_flight)


# ----------------------------------------------------------------------------- new nodes
def test_a_heavier_term_wins_over_a_lighter_one_it_conflicts_with():
    # listed lighter first: kube-scheduler scores a 1b node 50, a 1a node 10
    p = preferring("p", term(10, ZONE, "In", "ap-south-1a"), term(50, ZONE, "In", "ap-south-1b"))
    assert nodes(run([p])) == [("ap-south-1b", ["m5.large", "c5.xlarge", "m5.xlarge", "m5.2xlarge"], ["p"])]


def test_compatible_terms_are_all_honoured():
    p = preferring("p", term(50, ZONE, "In", "ap-south-1c"), term(20, INSTANCE_TYPE, "In", "m5.xlarge", "c5.xlarge"))
    assert nodes(run([p])) == [("ap-south-1c", ["c5.xlarge", "m5.xlarge"], ["p"])]


def test_two_lighter_terms_that_outweigh_a_heavier_one_win():
    # {1b or 1c: 40, 1b: 30} = 70 beats {1a: 60}; a node in 1b meets both
    p = preferring("p", term(60, ZONE, "In", "ap-south-1a"), term(40, ZONE, "In", "ap-south-1b", "ap-south-1c"),
                   term(30, ZONE, "In", "ap-south-1b"))
    assert [zone for zone, _, _ in nodes(run([p]))] == ["ap-south-1b"]


def test_equal_totals_keep_the_heavier_term():
    # {1a: 60} and {1b or 1c: 30, 1b: 30} both total 60: the set with the heavier term is held
    p = preferring("p", term(30, ZONE, "In", "ap-south-1b", "ap-south-1c"), term(60, ZONE, "In", "ap-south-1a"),
                   term(30, ZONE, "In", "ap-south-1b"))
    assert [zone for zone, _, _ in nodes(run([p]))] == ["ap-south-1a"]


def test_equal_weights_follow_the_order_of_the_spec():
    p = preferring("p", term(20, ZONE, "In", "ap-south-1c"), term(20, ZONE, "In", "ap-south-1b"))
    assert [zone for zone, _, _ in nodes(run([p]))] == ["ap-south-1c"]


def test_relaxation_gives_up_the_lighter_term_first():
    # 5 CPU: only m5.2xlarge holds it. Zone 1c (50) and c5.xlarge (10) can be met together, but
    # no such node holds the pod: the lighter term goes, the zone stays.
    p = preferring("p", term(50, ZONE, "In", "ap-south-1c"), term(10, INSTANCE_TYPE, "In", "c5.xlarge"), cpu="5")
    assert nodes(run([p])) == [("ap-south-1c", ["m5.2xlarge"], ["p"])]


def test_a_term_no_node_can_meet_is_dropped():
    # a zone outside the region and a label no instance type or Provisioner gives: the 1b term is honoured
    p = preferring("p", term(100, ZONE, "In", "us-east-1a"), term(90, "example.com/disk", "In", "ssd"),
                   term(1, ZONE, "In", "ap-south-1b"))
    plan = run([p])
    assert [zone for zone, _, _ in nodes(plan)] == ["ap-south-1b"] and plan.unschedulable == ()


def test_terms_of_weight_zero_and_empty_terms_count_for_nothing():
    empty = {"weight": 90, "preference": {}}
    p = preferring("p", term(0, ZONE, "In", "ap-south-1a"), empty, term(5, ZONE, "In", "ap-south-1c"))
    assert [zone for zone, _, _ in nodes(run([p]))] == ["ap-south-1c"]
    assert [w for w, _ in p.preferred_node_affinity] == [5]


def test_a_planned_node_in_another_zone_is_not_shared_while_the_term_holds():
    # p1 opens a node in 1a; p2 prefers 1b (and fits there): it gets a node of its own in 1b
    p1 = pod("p1", cpu="1", spec={"nodeSelector": {ZONE: "ap-south-1a"}})
    p2 = preferring("p2", term(10, ZONE, "In", "ap-south-1b"), cpu="500m")
    assert [(zone, names) for zone, _, names in nodes(run([p1, p2]))] == [
        ("ap-south-1a", ["p1"]), ("ap-south-1b", ["p2"])]


def test_preferred_zone_does_not_shrink_the_domains_of_a_hard_zone_spread():
    # kube-scheduler counts every zone the pod's required constraints allow: 1a twice would
    # make a skew of 2 against the empty zones, so the preference gives way for the 2nd and 3rd pod
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"app": "web"}}}]}
    pods = [preferring(f"w{i}", term(100, ZONE, "In", "ap-south-1a"), labels={"app": "web"}, spec=spread)
            for i in range(3)]
    plan = run(pods)
    assert sorted((zone, names) for zone, _, names in nodes(plan)) == [
        ("ap-south-1a", ["w0"]), ("ap-south-1b", ["w1"]), ("ap-south-1c", ["w2"])]


def test_a_term_met_only_by_a_tainted_provisioner_is_dropped_for_a_pod_that_does_not_tolerate_it():
    gpu_zone = provisioner("c-only", requirements=AMD64_OD + ((ZONE, "In", ("ap-south-1c",)),),
                           taints=[("dedicated", "NoSchedule", "x")], weight=10)
    plain = provisioner("plain", requirements=AMD64_OD + ((ZONE, "In", ("ap-south-1a", "ap-south-1b")),))
    p = preferring("p", term(90, ZONE, "In", "ap-south-1c"), term(10, ZONE, "In", "ap-south-1b"))
    plan = run([p], [gpu_zone, plain])
    assert [(n.provisioner, n.offering.zone) for n in plan.new_nodes] == [("plain", "ap-south-1b")]


# ----------------------------------------------------------------------------- existing nodes
def test_an_existing_node_takes_the_pod_although_it_meets_no_preferred_term():
    # kube-scheduler binds to a feasible node whatever it scores: nothing is launched
    p = preferring("p", term(100, ZONE, "In", "ap-south-1c"))
    plan = run([p], nodes=[existing("n-a", "ap-south-1a"), existing("n-b", "ap-south-1b")])
    assert plan.new_nodes == ()
    assert [(e.node, [q.name for q in e.pods]) for e in plan.existing] == [("n-a", ["p"])]


def test_the_existing_node_with_the_highest_score_takes_the_pod():
    # n-a meets the 50 term, n-b the 10 term, n-c both (60) but it is still launching
    p = preferring("p", term(10, ZONE, "In", "ap-south-1b"), term(50, INSTANCE_TYPE, "In", "m5.large"))
    ready = [existing("n-a", "ap-south-1a", "m5.large"), existing("n-b", "ap-south-1b")]
    plan = run([p], nodes=ready)
    assert [(e.node, [q.name for q in e.pods]) for e in plan.existing] == [("n-a", ["p"])]
    # a node meeting both terms wins over both
    plan = run([p], nodes=[*ready, existing("n-c", "ap-south-1b", "m5.large")])
    assert [e.node for e in plan.existing] == ["n-c"]
    # an in-flight node only when no initialised node takes the pod (kube-scheduler binds to Ready nodes)
    plan = run([p], nodes=[*ready, existing("n-c", "ap-south-1b", "m5.large", in_flight=True)])
    assert [e.node for e in plan.existing] == ["n-a"]
    plan = run([p], nodes=[existing("n-c", "ap-south-1b", "m5.large", in_flight=True),
                           existing("n-d", "ap-south-1b", in_flight=True)])
    assert [e.node for e in plan.existing] == ["n-c"]


def test_existing_nodes_with_equal_scores_are_taken_in_order():
    p = preferring("p", term(10, ZONE, "In", "ap-south-1b"))
    plan = run([p], nodes=[existing("n-b2", "ap-south-1b"), existing("n-a", "ap-south-1a"),
                           existing("n-b1", "ap-south-1b")])
    assert [e.node for e in plan.existing] == ["n-b1"]


def test_required_affinity_still_filters_existing_nodes():
    required = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["ap-south-1b", "ap-south-1c"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [term(10, ZONE, "In", "ap-south-1a")]}}
    p = pod_from_manifest(manifest("p", cpu="1", spec={"affinity": required}))
    plan = run([p], nodes=[existing("n-a", "ap-south-1a"), existing("n-c", "ap-south-1c")])
    assert [e.node for e in plan.existing] == ["n-c"] and plan.new_nodes == ()


# ----------------------------------------------------------------------------- the sets held, in order
def test_sets_are_tried_by_total_weight_then_heavier_terms_then_spec_order():
    from provisioner.model.requirements import Requirements
    from provisioner.scheduling.solver.preferences import preferred_sets

    def zone(*zones):
        return Requirements.from_node_selector_requirements([{"key": ZONE, "operator": "In", "values": list(zones)}])

    terms = [(60, zone("a")), (40, zone("b", "c")), (30, zone("b")), (30, zone("c"))]
    asked = []

    def feasible(requirements):
        asked.append(str(requirements))
        return True

    sets = preferred_sets(terms, feasible)
    # {a} conflicts with the others; {b,c}+{b} = 70, {b,c}+{c} = 70 (spec order), {a} = 60 before
    # {b,c} alone (40); {b} and {c} alone ask for what {b,c}+{b} and {b,c}+{c} did: not again;
    # the empty set last
    assert [(s.indices, s.weight) for s in sets] == [((1, 2), 70), ((1, 3), 70), ((0,), 60), ((1,), 40), ((), 0)]
    # sets whose terms conflict are never asked about, nor extended
    assert len(asked) == 6


def test_only_the_heaviest_terms_take_part_and_duplicates_are_tried_once():
    from provisioner.model.requirements import Requirements
    from provisioner.scheduling.solver.preferences import MAX_HELD_TERMS, preferred_sets

    terms = [(100 - i, Requirements.from_labels({f"k{i}": "v"})) for i in range(MAX_HELD_TERMS + 2)]
    sets = preferred_sets(terms, lambda requirements: True)
    assert len(sets) == 2 ** MAX_HELD_TERMS  # every subset of the 8 heaviest, the empty one last
    assert sets[0].indices == tuple(range(MAX_HELD_TERMS)) and sets[-1].indices == ()
    same = Requirements.from_labels({"k": "v"})
    assert [s.indices for s in preferred_sets([(5, same), (5, same)], lambda requirements: True)] == [(0, 1), ()]
