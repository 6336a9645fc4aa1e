"""Invariants of any plan, over generated pods, nodes and limits."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.model.resources import Resources
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import solver_catalog
from tests.builders.pods import pod
from tests.builders.provisioners import provisioner

ZONE = "topology.kubernetes.io/zone"
CPUS = ["50m", "250m", "1", "3"]
MEMS = ["64Mi", "1Gi", "6Gi"]


@st.composite
def scenario(draw):
    pods = []
    for i in range(draw(st.integers(0, 14))):
        spec = {}
        kind = draw(st.sampled_from(["plain", "zone", "spread", "anti", "gpu"]))
        labels = {"app": draw(st.sampled_from(["a", "b"]))}
        if kind == "zone":
            spec["nodeSelector"] = {ZONE: draw(st.sampled_from(["ap-south-1a", "ap-south-1b", "ap-south-1z"]))}
        elif kind == "spread":
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                  "labelSelector": {"matchLabels": labels}}]
        elif kind == "anti":
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}]}}
        elif kind == "gpu":
            spec["containers"] = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
        pods.append(pod(f"p{i}", cpu=draw(st.sampled_from(CPUS)), memory=draw(st.sampled_from(MEMS)),
                        labels=labels, spec=spec))
    limit = draw(st.sampled_from([None, "4", "12"]))
    nodes = []
    if draw(st.booleans()):
        nodes.append(ClusterNode(name="n1", labels={ZONE: "ap-south-1a"},
                                 allocatable=Resources({"cpu": 2000, "memory": 4 * 2**30, "pods": 10}),
                                 requested=Resources({"cpu": draw(st.sampled_from([0, 1500])), "pods": 1}),
                                 in_flight=draw(st.booleans())))
    return pods, limit, nodes


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_every_pod_is_accounted_for_once_nodes_fit_and_limits_hold(case):
    pods, limit, nodes = case
    prov = provisioner(limits={"cpu": limit} if limit else None)
    types = solver_catalog()
    plan = solve(SolverInput(pods=pods, provisioners=[prov], instance_types={"default": types}, nodes=nodes))
    seen = [p.uid for n in plan.new_nodes for p in n.pods] + [p.uid for e in plan.existing for p in e.pods] + [
        e.pod.uid for e in plan.unschedulable]
    assert sorted(seen) == sorted(p.uid for p in pods)
    for node in plan.new_nodes:
        need = Resources.sum(p.requests for p in node.pods)
        assert node.instance_type_options, node
        for option in node.instance_type_options:
            assert need.fits(option.allocatable)
            assert option.has_accelerator == any(p.requests.get("nvidia.com/gpu") for p in node.pods)
        prices = [o.price for o in node.instance_type_options[0].available_offerings(node.requirements)]
        assert node.price == min(prices)
        for p in node.pods:
            if p.pod_anti_affinity:
                assert [q.labels["app"] for q in node.pods].count(p.labels["app"]) == 1
    for placement in plan.existing:
        existing = next(n for n in nodes if n.name == placement.node)
        assert (existing.requested + Resources.sum(p.requests for p in placement.pods)).fits(existing.allocatable)
    if limit:
        worst = sum(max(o.capacity["cpu"] for o in n.instance_type_options) for n in plan.new_nodes)
        assert worst <= int(limit) * 1000
    assert solve(SolverInput(pods=list(reversed(pods)), provisioners=[prov], instance_types={"default": types},
                             nodes=nodes)).total_price == plan.total_price
