from provisioner.scheduling.pods import pod_from_manifest
from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import solver_catalog, solver_r6gd_xlarge
from tests.builders.pods import manifest, pod
from tests.builders.provisioners import WALKTHROUGH_REQUIREMENTS, provisioner

WALKTHROUGH_SELECTOR = {
    "node.kubernetes.io/instance-type": "r6gd.xlarge",
    "karpenter.sh/capacity-type": "on-demand",
    "topology.kubernetes.io/zone": "ap-south-1a",
    "kubernetes.io/arch": "arm64",
}


def run(pods, provisioners=None, types=None, **kw):
    provisioners = provisioners or [provisioner(requirements=WALKTHROUGH_REQUIREMENTS)]
    types = types if types is not None else solver_catalog()
    return solve(SolverInput(pods=pods, provisioners=provisioners,
                             instance_types={p.name: types for p in provisioners}, **kw))


def test_walkthrough_three_inflate_pods_give_one_r6gd_xlarge_on_demand_in_ap_south_1a():
    pods = [pod(f"inflate-{i}", cpu="1", spec={"nodeSelector": WALKTHROUGH_SELECTOR}) for i in range(3)]
    plan = run(pods, types=[solver_r6gd_xlarge(0.08)])
    assert len(plan.new_nodes) == 1
    node = plan.new_nodes[0]
    assert [it.name for it in node.instance_type_options] == ["r6gd.xlarge"]
    assert (node.offering.zone, node.offering.capacity_type) == ("ap-south-1a", "on-demand")
    assert node.price == 0.2304
    assert sorted(p.name for p in node.pods) == ["inflate-0", "inflate-1", "inflate-2"]
    assert node.labels["karpenter.sh/provisioner-name"] == "default"
    assert node.labels["topology.kubernetes.io/zone"] == "ap-south-1a"
    assert plan.unschedulable == ()


AMD64_OD = (
    ("karpenter.sh/capacity-type", "In", ("on-demand",)),
    ("kubernetes.io/arch", "In", ("amd64",)),
)


def names(plan):
    return [n.instance_type_options[0].name for n in plan.new_nodes]


def ds(name, cpu, tolerations=None, node_selector=None):
    from provisioner.scheduling.daemonsets import daemonset_pod

    spec = {"containers": [{"name": "d", "resources": {"requests": {"cpu": cpu}}}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    return daemonset_pod({"metadata": {"name": name, "namespace": "kube-system", "uid": f"ds-{name}"},
                          "spec": {"template": {"spec": spec}}})


def test_daemonset_with_blanket_toleration_counts_on_a_tainted_provisioner():
    tainted = provisioner(requirements=AMD64_OD, taints=[("dedicated", "NoSchedule", "batch")])
    tolerating = pod("p", cpu="1", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    # without the DaemonSet: 1 CPU fits m5.large (1930m allocatable)
    assert names(run([tolerating], [tainted])) == ["m5.large"]
    # a DaemonSet that tolerates everything adds 1500m: 2500m needs a 4-vCPU type, c5.xlarge the cheapest
    blanket = ds("agent", "1500m", tolerations=[{"operator": "Exists"}])
    assert names(run([tolerating], [tainted], daemonsets=[blanket])) == ["c5.xlarge"]
    # a DaemonSet that does not tolerate the taint never runs there and is not counted
    plain = ds("other", "1500m")
    assert names(run([tolerating], [tainted], daemonsets=[plain])) == ["m5.large"]
    # nor is one whose nodeSelector the node cannot meet
    arm_only = ds("arm", "1500m", tolerations=[{"operator": "Exists"}], node_selector={"kubernetes.io/arch": "arm64"})
    assert names(run([tolerating], [tainted], daemonsets=[arm_only])) == ["m5.large"]


def test_init_containers_larger_than_the_app_size_the_node():
    p = pod("p", cpu="100m", spec={"initContainers": [
        {"name": "init", "resources": {"requests": {"cpu": "3"}}}]})
    plan = run([p], [provisioner(requirements=AMD64_OD)])
    assert names(plan) == ["c5.xlarge"]
    assert p.requests["cpu"] == 3000


def test_zone_outside_the_provisioner_gets_a_reason_and_no_node():
    prov = provisioner(requirements=(("topology.kubernetes.io/zone", "In", ("ap-south-1a", "ap-south-1b")),))
    p = pod("p", spec={"nodeSelector": {"topology.kubernetes.io/zone": "ap-south-1c"}})
    plan = run([p], [prov])
    assert plan.new_nodes == ()
    assert len(plan.unschedulable) == 1
    reason = plan.unschedulable[0].reason
    assert reason == ("provisioner default: incompatible requirements, key topology.kubernetes.io/zone, "
                      "topology.kubernetes.io/zone In [ap-south-1c] not in "
                      "topology.kubernetes.io/zone In [ap-south-1a, ap-south-1b]")


def test_limits_hold_under_a_burst():
    from tests.builders.catalog import instance_type

    m5 = instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)
    prov = provisioner(limits={"cpu": "8"})
    burst = [pod(f"p{i}", cpu="1") for i in range(20)]
    plan = run(burst, [prov], types=[m5])
    assert len(plan.new_nodes) == 2  # 2 x 4 vCPU = the limit; 3 one-CPU pods each
    assert sum(len(n.pods) for n in plan.new_nodes) == 6
    assert len(plan.unschedulable) == 14
    assert ("would exceed limits of provisioner default (cpu: 8 in use or planned of 8; "
            "the smallest instance type that fits the pod adds cpu: 4)") in plan.unschedulable[0].reason
    # capacity already counted against the limit (existing and in-flight nodes) leaves room for one node
    from provisioner.model.resources import Resources

    plan = run(burst, [prov], types=[m5], provisioner_usage={"default": Resources({"cpu": 4000})})
    assert len(plan.new_nodes) == 1 and len(plan.unschedulable) == 17


def test_provisioners_by_weight_then_name_and_next_one_when_incompatible():
    a = provisioner("a", requirements=AMD64_OD)
    b = provisioner("b", requirements=AMD64_OD, weight=10)
    c = provisioner("c", requirements=AMD64_OD, labels=[("team", "red")])
    plan = run([pod("x"), pod("y", spec={"nodeSelector": {"team": "red"}})], [a, b, c])
    assert sorted((n.provisioner, [p.name for p in n.pods]) for n in plan.new_nodes) == [("b", ["x"]), ("c", ["y"])]
    assert plan.new_nodes[0].labels["karpenter.sh/provisioner-name"] in ("b", "c")
    without_weight = run([pod("x")], [provisioner("b", requirements=AMD64_OD), a])
    assert [n.provisioner for n in without_weight.new_nodes] == ["a"]


def test_unknown_label_is_rejected_by_every_provisioner_with_reasons():
    plan = run([pod("x", spec={"nodeSelector": {"team": "blue"}})],
               [provisioner("a", labels=[("team", "red")]), provisioner("b")])
    assert plan.unschedulable[0].reason == (
        "provisioner a: incompatible requirements, key team, team In [blue] not in team In [red]; "
        "provisioner b: incompatible requirements, label team does not have known values")


def test_required_node_affinity_terms_are_ored():
    prov = provisioner(requirements=(("topology.kubernetes.io/zone", "In", ("ap-south-1b",)),) + AMD64_OD)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1a"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1b"]}]},
    ]}}}
    plan = run([pod("p", spec={"affinity": affinity})], [prov])
    assert [n.offering.zone for n in plan.new_nodes] == ["ap-south-1b"]


def test_preferred_node_affinity_is_held_then_relaxed():
    prov = provisioner(requirements=(("topology.kubernetes.io/zone", "In", ("ap-south-1a", "ap-south-1b")),) + AMD64_OD)

    def preferring(name, zone):
        return pod(name, spec={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}}]}}})

    held = run([preferring("p", "ap-south-1b")], [prov])
    assert [n.offering.zone for n in held.new_nodes] == ["ap-south-1b"]
    relaxed = run([preferring("p", "ap-south-1c")], [prov])
    assert [n.offering.zone for n in relaxed.new_nodes] == ["ap-south-1a"] and relaxed.unschedulable == ()


def test_taints_startup_taints_and_prefer_no_schedule():
    prov = provisioner(requirements=AMD64_OD, taints=[("dedicated", "NoSchedule", "x")])
    plan = run([pod("p")], [prov])
    assert plan.unschedulable[0].reason == "provisioner default: did not tolerate taint dedicated=x:NoSchedule"
    startup = provisioner(requirements=AMD64_OD, startup_taints=[("cni", "NoSchedule", "")])
    assert len(run([pod("p")], [startup]).new_nodes) == 1
    soft = provisioner("soft", requirements=AMD64_OD, taints=[("spare", "PreferNoSchedule", "")], weight=5)
    plain = provisioner("plain", requirements=AMD64_OD)
    # held while preferences hold: the untainted provisioner wins although "soft" weighs more
    assert [n.provisioner for n in run([pod("p")], [soft, plain]).new_nodes] == ["plain"]
    # relaxed when nothing else can take the pod
    assert [n.provisioner for n in run([pod("p")], [soft]).new_nodes] == ["soft"]


def spread(key, when="DoNotSchedule", app="web"):
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
                                           "labelSelector": {"matchLabels": {"app": app}}}]}


def test_zone_spread_gives_one_node_per_zone():
    pods = [pod(f"w{i}", cpu="1", labels={"app": "web"}, spec=spread("topology.kubernetes.io/zone")) for i in range(3)]
    plan = run(pods, [provisioner(requirements=AMD64_OD)])
    assert sorted(n.offering.zone for n in plan.new_nodes) == ["ap-south-1a", "ap-south-1b", "ap-south-1c"]


def test_zone_spread_counts_existing_pods_and_limits_domains_to_what_can_launch():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    running = pod("old", labels={"app": "web"})
    existing = ClusterNode(name="n1", labels={"topology.kubernetes.io/zone": "ap-south-1a"},
                           allocatable=Resources({"cpu": 100, "memory": 1, "pods": 1}),
                           requested=Resources({"cpu": 100, "pods": 1}), pods=(running,))
    pods = [pod(f"w{i}", cpu="1", labels={"app": "web"}, spec=spread("topology.kubernetes.io/zone")) for i in range(2)]
    plan = run(pods, [provisioner(requirements=AMD64_OD)], nodes=[existing])
    assert sorted(n.offering.zone for n in plan.new_nodes) == ["ap-south-1b", "ap-south-1c"]
    # with subnets only in 1a and 1b the domains are those two: 1c does not count, both pods go to 1b
    # (a=1, b=2 is within maxSkew 1)
    plan = run(pods, [provisioner(requirements=AMD64_OD)], nodes=[existing],
               zones={"default": frozenset({"ap-south-1a", "ap-south-1b"})})
    assert [(n.offering.zone, len(n.pods)) for n in plan.new_nodes] == [("ap-south-1b", 2)]
    # a third pod would make b=3 against a=1: it gets a new node in 1a (the existing one is full)
    third = pods + [pod("w2", cpu="1", labels={"app": "web"}, spec=spread("topology.kubernetes.io/zone"))]
    plan = run(third, [provisioner(requirements=AMD64_OD)], nodes=[existing],
               zones={"default": frozenset({"ap-south-1a", "ap-south-1b"})})
    assert [(n.offering.zone, len(n.pods)) for n in plan.new_nodes] == [("ap-south-1b", 2), ("ap-south-1a", 1)]


def test_hard_spread_that_cannot_be_met_is_reported():
    prov = provisioner(requirements=(("topology.kubernetes.io/zone", "In", ("ap-south-1a",)),) + AMD64_OD)
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    # zone 1b exists (a running node) but is full; 1a may only get one more web pod
    other = ClusterNode(name="n1", labels={"topology.kubernetes.io/zone": "ap-south-1b"},
                        allocatable=Resources({"cpu": 100, "pods": 1}), requested=Resources({"cpu": 100, "pods": 1}))
    pods = [pod(f"w{i}", cpu="1", labels={"app": "web"}, spec=spread("topology.kubernetes.io/zone")) for i in range(2)]
    plan = run(pods, [prov], nodes=[other])
    assert [len(n.pods) for n in plan.new_nodes] == [1]
    assert [(e.pod.name, e.reason) for e in plan.unschedulable] == [
        ("w1", "provisioner default: would violate topology spread on topology.kubernetes.io/zone")]


def test_schedule_anyway_hostname_spread_is_held_on_new_nodes():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    prov = provisioner(requirements=(("topology.kubernetes.io/zone", "In", ("ap-south-1a",)),) + AMD64_OD)
    # a full node without web pods is a domain: the minimum stays 0, one web pod per new node
    full = ClusterNode(name="n1", labels={"topology.kubernetes.io/zone": "ap-south-1a"},
                       allocatable=Resources({"cpu": 100, "pods": 1}), requested=Resources({"cpu": 100, "pods": 1}))
    soft = [pod(f"w{i}", cpu="100m", labels={"app": "web"}, spec=spread("kubernetes.io/hostname", "ScheduleAnyway"))
            for i in range(3)]
    plan = run(soft, [prov], nodes=[full])
    assert [len(n.pods) for n in plan.new_nodes] == [1, 1, 1] and plan.unschedulable == ()
    hard = [pod(f"h{i}", cpu="100m", labels={"app": "web"}, spec=spread("kubernetes.io/hostname")) for i in range(3)]
    assert len(run(hard, [prov], nodes=[full]).new_nodes) == 3


def anti(app="web", key="kubernetes.io/hostname"):
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}]}}}


def test_anti_affinity_without_label_selector_keeps_no_pod_away():
    no_selector = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname"}]}}}
    pods = [pod(f"w{i}", labels={"app": "web"}, spec=no_selector) for i in range(3)]
    assert [len(n.pods) for n in run(pods, [provisioner(requirements=AMD64_OD)]).new_nodes] == [3]


def test_hostname_anti_affinity_gives_a_node_each_and_respects_running_pods():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    pods = [pod(f"w{i}", labels={"app": "web"}, spec=anti()) for i in range(3)]
    assert len(run(pods, [provisioner(requirements=AMD64_OD)]).new_nodes) == 3
    # a running pod whose own anti-affinity selects app=web keeps new web pods off its node
    guard = pod("guard", labels={"app": "guard"}, spec=anti("web"))
    roomy = ClusterNode(name="n1", labels={"topology.kubernetes.io/zone": "ap-south-1a"},
                        allocatable=Resources({"cpu": 8000, "memory": 10**10, "pods": 50}),
                        requested=Resources({"cpu": 100, "pods": 1}), pods=(guard,))
    plan = run([pod("w", labels={"app": "web"}), pod("x", labels={"app": "other"})],
               [provisioner(requirements=AMD64_OD)], nodes=[roomy])
    assert [(e.node, [p.name for p in e.pods]) for e in plan.existing] == [("n1", ["x"])]
    assert [[p.name for p in n.pods] for n in plan.new_nodes] == [["w"]]


def test_zone_pod_affinity_follows_the_running_pod():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    db = pod("db", labels={"app": "db"})
    full = ClusterNode(name="n1", labels={"topology.kubernetes.io/zone": "ap-south-1b"},
                       allocatable=Resources({"cpu": 100, "pods": 1}), requested=Resources({"cpu": 100, "pods": 1}),
                       pods=(db,))
    affinity = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    plan = run([pod("api", spec=affinity)], [provisioner(requirements=AMD64_OD)], nodes=[full])
    assert [n.offering.zone for n in plan.new_nodes] == ["ap-south-1b"]
    lonely = run([pod("api", spec=affinity)], [provisioner(requirements=AMD64_OD)])
    assert lonely.new_nodes == () and "pod affinity" in lonely.unschedulable[0].reason


def test_volume_topology_pins_the_zone():
    from provisioner.scheduling.volumes import volume_requirements

    obj = manifest("db", spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                           {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}]})
    pvcs = [{"metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-1"}},
            {"metadata": {"name": "scratch", "namespace": "default"}, "spec": {"storageClassName": "gp3"}}]
    pvs = [{"metadata": {"name": "pv-1"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["ap-south-1c"]}]}]}}}}]
    classes = [{"metadata": {"name": "gp3"}, "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": [
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["ap-south-1b", "ap-south-1c"]}]}]}]
    reqs = volume_requirements(obj, pvcs, pvs, classes)
    assert [str(r) for r in reqs] == ["topology.kubernetes.io/zone In [ap-south-1c]",
                                      "topology.kubernetes.io/zone In [ap-south-1b, ap-south-1c]"]
    p = pod_from_manifest(obj, reqs)
    plan = run([p], [provisioner(requirements=AMD64_OD)])
    assert [n.offering.zone for n in plan.new_nodes] == ["ap-south-1c"]


def test_nominated_pods_are_left_to_kube_scheduler_and_bound_pods_skipped():
    nominated = pod_from_manifest(manifest("n", status={"nominatedNodeName": "n1"}))
    bound = pod_from_manifest(manifest("b", spec={"nodeName": "n1"}))
    plan = run([nominated, bound], [provisioner(requirements=AMD64_OD)])
    assert plan.new_nodes == () and plan.unschedulable == () and plan.existing == ()


def test_host_ports_conflict_on_one_node():
    def with_port(name, port):
        return pod(name, spec={"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port}],
                                               "resources": {"requests": {"cpu": "100m"}}}]})

    plan = run([with_port("a", 8080), with_port("b", 8080), with_port("c", 9090)], [provisioner(requirements=AMD64_OD)])
    assert sorted(sorted(p.name for p in n.pods) for n in plan.new_nodes) == [["a", "c"], ["b"]]


def test_max_pods_bounds_a_node():
    from tests.builders.catalog import instance_type

    tiny = instance_type("t3.nano", "amd64", 2000, 512, 4, 1930, 400, 0.0052)
    plan = run([pod(f"p{i}", cpu="10m") for i in range(6)], [provisioner()], types=[tiny])
    assert [len(n.pods) for n in plan.new_nodes] == [4, 2]


def test_gpu_types_only_for_gpu_pods():
    gpu = pod("g", spec={"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]})
    plan = run([gpu, pod("web", cpu="100m")], [provisioner(requirements=AMD64_OD)])
    assert sorted((n.instance_type_options[0].name, [p.name for p in n.pods]) for n in plan.new_nodes) == [
        ("g4dn.xlarge", ["g"]), ("m5.large", ["web"])]
    assert all(not it.has_accelerator for it in plan.new_nodes[0].instance_type_options
               if plan.new_nodes[0].pods[0].name == "web")


def test_existing_and_in_flight_nodes_are_used_first():
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    alloc = Resources({"cpu": 3820, "memory": 29217 * 2**20, "pods": 58})
    ready = ClusterNode(name="ready", labels={}, allocatable=alloc, requested=Resources({"cpu": 2820, "pods": 1}))
    launching = ClusterNode(name="launching", labels={}, allocatable=alloc, requested=Resources({"cpu": 1820}),
                            in_flight=True)
    doomed = ClusterNode(name="doomed", labels={}, allocatable=alloc, marked_for_deletion=True)
    pods = [pod(f"p{i}", cpu="1") for i in range(4)]
    plan = run(pods, [provisioner(requirements=AMD64_OD)], nodes=[launching, doomed, ready])
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("ready", 1), ("launching", 2)]
    assert [len(n.pods) for n in plan.new_nodes] == [1]


def test_same_input_same_plan():
    import random

    pods = [pod(f"p{i}", cpu=f"{100 * (i % 7 + 1)}m", memory=f"{(i % 5 + 1) * 256}Mi") for i in range(60)]
    shuffled = list(pods)
    random.Random(7).shuffle(shuffled)
    a, b = run(pods, [provisioner(requirements=AMD64_OD)]), run(shuffled, [provisioner(requirements=AMD64_OD)])
    assert [(n.instance_type_options[0].name, [p.name for p in n.pods]) for n in a.new_nodes] == [
        (n.instance_type_options[0].name, [p.name for p in n.pods]) for n in b.new_nodes]
    assert a.total_price == b.total_price


def test_cost_aware_packing_beats_first_fit_when_bigger_nodes_cost_more_per_pod():
    from provisioner.scheduling.solver import solve_first_fit
    from tests.builders.catalog import instance_type

    small = instance_type("g4dn.xlarge", "amd64", 4000, 14968, 29, 3820, 13875, 0.526, extra={"nvidia.com/gpu": 1})
    big = instance_type("g4dn.12xlarge", "amd64", 48000, 176000, 234, 47500, 170000, 3.912, extra={"nvidia.com/gpu": 4})
    gpu = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}}}]}
    pods = [pod(f"train-{i}", spec=gpu) for i in range(4)]
    given = dict(pods=pods, provisioners=[provisioner()], instance_types={"default": [small, big]})
    cost_aware = solve(SolverInput(**given))
    first_fit = solve_first_fit(SolverInput(**given))
    assert names(cost_aware) == ["g4dn.xlarge"] * 4 and round(cost_aware.total_price, 3) == 2.104
    assert names(first_fit) == ["g4dn.12xlarge"] and first_fit.total_price == 3.912


def test_capacity_type_spread_uses_both_capacity_types():
    prov = provisioner(requirements=(("kubernetes.io/arch", "In", ("amd64",)),
                                     ("topology.kubernetes.io/zone", "In", ("ap-south-1a",))))
    pods = [pod(f"w{i}", cpu="1", labels={"app": "web"}, spec=spread("karpenter.sh/capacity-type")) for i in range(2)]
    plan = run(pods, [prov])
    assert sorted(n.offering.capacity_type for n in plan.new_nodes) == ["on-demand", "spot"]
    assert sorted(n.labels["karpenter.sh/capacity-type"] for n in plan.new_nodes) == ["on-demand", "spot"]


def test_preferred_anti_affinity_is_held_then_relaxed():
    prov = provisioner(requirements=AMD64_OD, limits={"cpu": "2"})
    preferred = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": {"app": "web"}}}}]}}}
    pods = [pod(f"w{i}", cpu="100m", labels={"app": "web"}, spec=preferred) for i in range(3)]
    # the limit (2 vCPU) allows one m5.large: the preference is relaxed and all three share it
    plan = run(pods, [prov])
    assert [(n.instance_type_options[0].name, len(n.pods)) for n in plan.new_nodes] == [("m5.large", 3)]
    # without the limit each pod gets a node of its own
    assert len(run(pods, [provisioner(requirements=AMD64_OD)]).new_nodes) == 3


def test_in_flight_node_taints_that_go_away_do_not_cause_a_second_launch():
    from provisioner.api.types import Taint
    from provisioner.model.resources import Resources
    from provisioner.scheduling.nodes import ClusterNode

    prov = provisioner(requirements=AMD64_OD, startup_taints=[("cni.example/agent", "NoSchedule", "")])
    launching = ClusterNode(
        name="launching", labels={"karpenter.sh/provisioner-name": "default"}, provisioner="default", in_flight=True,
        taints=(Taint("karpenter.sh/not-ready", "NoSchedule"), Taint("cni.example/agent", "NoSchedule")),
        allocatable=Resources({"cpu": 3820, "memory": 10**10, "pods": 58}), requested=Resources({"cpu": 1000}))
    plan = run([pod("p", cpu="1")], [prov], nodes=[launching])
    assert [(e.node, [p.name for p in e.pods]) for e in plan.existing] == [("launching", ["p"])]
    assert plan.new_nodes == ()
    # once Ready, a node's taints are real
    ready = ClusterNode(name="ready", labels={}, taints=(Taint("cni.example/agent", "NoSchedule"),),
                        allocatable=launching.allocatable)
    assert len(run([pod("p", cpu="1")], [prov], nodes=[ready]).new_nodes) == 1
