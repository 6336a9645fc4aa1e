from provisioner.scheduling.solver import SolverInput, solve
from tests.unit.scheduling.builders import WALKTHROUGH_REQUIREMENTS, catalog, pod, provisioner, r6gd_xlarge

WALKTHROUGH_SELECTOR = {
    "node.kubernetes.io/instance-type": "r6gd.xlarge",
    "karpenter.sh/capacity-type": "on-demand",
    "topology.kubernetes.io/zone": "ap-south-1a",
    "kubernetes.io/arch": "arm64",
}


def run(pods, provisioners=None, types=None, **kw):
    provisioners = provisioners or [provisioner(requirements=WALKTHROUGH_REQUIREMENTS)]
    types = types if types is not None else catalog()
    return solve(SolverInput(pods=pods, provisioners=provisioners,
                             instance_types={p.name: types for p in provisioners}, **kw))


def test_walkthrough_three_inflate_pods_give_one_r6gd_xlarge_on_demand_in_ap_south_1a():
    pods = [pod(f"inflate-{i}", cpu="1", spec={"nodeSelector": WALKTHROUGH_SELECTOR}) for i in range(3)]
    plan = run(pods, types=[r6gd_xlarge(0.08)])
    assert len(plan.new_nodes) == 1
    node = plan.new_nodes[0]
    assert [it.name for it in node.instance_type_options] == ["r6gd.xlarge"]
    assert (node.offering.zone, node.offering.capacity_type) == ("ap-south-1a", "on-demand")
    assert node.price == 0.2304
    assert sorted(p.name for p in node.pods) == ["inflate-0", "inflate-1", "inflate-2"]
    assert node.labels["karpenter.sh/provisioner-name"] == "default"
    assert node.labels["topology.kubernetes.io/zone"] == "ap-south-1a"
    assert plan.unschedulable == ()
