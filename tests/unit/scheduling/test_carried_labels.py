"""Requirements are met by the labels a node will really carry.

A key only some instance types carry (``karpenter.k8s.aws/instance-local-nvme``,
``instance-gpu-*``) is absent on a node of a type without it: In, Exists, Gt and Lt are not met
there, NotIn and DoesNotExist are. The well-known labels the launch sets (zone, capacity type,
arch, os, instance type, hostname, provisioner name, the Provisioner's labels) are carried
whatever the type. Existing nodes are judged by the labels they have. Exact plans over a small
catalog with the AWS provider's labels.
"""

from __future__ import annotations

import random

from provisioner.cloudprovider.types import Machine
from provisioner.controllers.provisioning.nodes import node_labels
from provisioner.model.resources import Resources
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import instance_type
from tests.builders.pods import pod
from tests.builders.provisioners import provisioner

NVME = "karpenter.k8s.aws/instance-local-nvme"
GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
FAMILY = "karpenter.k8s.aws/instance-family"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))


def catalog():
    """m5.xlarge (no local disk), m5d.xlarge (150 GB NVMe), m5dn.xlarge (300 GB), g4dn.xlarge (T4 GPU, 125 GB)."""
    return [
        instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202, labels={FAMILY: "m5"}),
        instance_type("m5d.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.238,
                      labels={FAMILY: "m5d", NVME: "150"}),
        instance_type("m5dn.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.278,
                      labels={FAMILY: "m5dn", NVME: "300"}),
        instance_type("g4dn.xlarge", "amd64", 4000, 14968, 29, 3820, 13875, 0.579, extra={"nvidia.com/gpu": 1},
                      labels={FAMILY: "g4dn", NVME: "125", GPU_NAME: "t4", GPU_COUNT: "1"}),
    ]


def run(pods, provisioners=None, **kw):
    provisioners = provisioners or [provisioner(requirements=AMD64_OD)]
    return solve(SolverInput(pods=pods, provisioners=provisioners,
                             instance_types={p.name: catalog() for p in provisioners}, **kw))


def requiring(name, *expressions, gpu=False, node_selector=None, cpu="1"):
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": o, **({"values": list(v)} if v else {})} for k, o, *v in expressions]}]}}}}
    if gpu:
        spec["containers"] = [{"name": "app", "image": "x",
                               "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]
    if node_selector:
        spec["nodeSelector"] = node_selector
    return pod(name, cpu=cpu, spec=spec)


def options(plan):
    return [[t.name for t in n.instance_type_options] for n in plan.new_nodes]


def test_in_exists_gt_and_lt_are_not_met_by_a_type_without_the_label():
    assert options(run([requiring("p", (NVME, "Exists"))])) == [["m5d.xlarge", "m5dn.xlarge"]]
    assert options(run([requiring("p", (NVME, "Gt", "200"))])) == [["m5dn.xlarge"]]
    assert options(run([requiring("p", (NVME, "Lt", "200"))])) == [["m5d.xlarge"]]
    assert options(run([requiring("p", (NVME, "In", "150", "300"))])) == [["m5d.xlarge", "m5dn.xlarge"]]


def test_not_in_and_does_not_exist_are_met_by_a_type_without_the_label():
    assert options(run([requiring("p", (NVME, "DoesNotExist"))])) == [["m5.xlarge"]]
    assert options(run([requiring("p", (NVME, "NotIn", "150"))])) == [["m5.xlarge", "m5dn.xlarge"]]


def test_a_label_only_accelerator_types_carry():
    plan = run([requiring("p", (GPU_NAME, "In", "t4"), gpu=True)])
    assert options(plan) == [["g4dn.xlarge"]]
    # a pod without a GPU that asks for one by label: no instance type carries it for such a pod
    plan = run([requiring("p", (GPU_COUNT, "Exists"))])
    assert plan.new_nodes == ()
    assert plan.unschedulable[0].reason == (
        "provisioner default: no instance type meets karpenter.k8s.aws/instance-gpu-count Exists, "
        "karpenter.sh/capacity-type In [on-demand], karpenter.sh/provisioner-name In [default], "
        "kubernetes.io/arch In [amd64], kubernetes.io/os In [linux], "
        "topology.kubernetes.io/zone In [ap-south-1a, ap-south-1b, ap-south-1c]")


def test_a_provisioner_requirement_on_such_a_label_leaves_out_the_types_without_it():
    local_disk = provisioner(requirements=AMD64_OD + ((NVME, "Exists", ()),))
    assert options(run([pod("p", cpu="1")], [local_disk])) == [["m5d.xlarge", "m5dn.xlarge"]]


def test_well_known_labels_are_carried_whatever_the_type():
    labelled = provisioner(requirements=AMD64_OD, labels=[("team", "red")])
    pods = [
        requiring("by-hostname", ("kubernetes.io/hostname", "Exists"), cpu="500m"),
        requiring("not-that-host", ("kubernetes.io/hostname", "NotIn", "old-node"), cpu="500m"),
        requiring("by-team", ("team", "In", "red"), cpu="500m"),
        requiring("by-provisioner", ("karpenter.sh/provisioner-name", "In", "default"), cpu="500m"),
        requiring("by-zone", ("topology.kubernetes.io/zone", "Exists"), ("karpenter.sh/capacity-type", "Exists"),
                  ("kubernetes.io/os", "In", "linux"), ("node.kubernetes.io/instance-type", "Exists"), cpu="500m"),
    ]
    for alone in pods:
        plan = run([alone], [labelled])
        assert plan.unschedulable == (), alone.name
        assert options(plan) == [["m5.xlarge", "m5d.xlarge", "m5dn.xlarge"]]
    plan = run(pods, [labelled])
    assert plan.unschedulable == ()
    assert [sorted(p.name for p in n.pods) for n in plan.new_nodes] == [sorted(p.name for p in pods)]


def test_a_new_nodes_hostname_cannot_be_chosen():
    plan = run([requiring("p", ("kubernetes.io/hostname", "In", "node-7"))])
    assert plan.new_nodes == ()
    assert plan.unschedulable[0].reason == (
        "provisioner default: incompatible requirements, label kubernetes.io/hostname of a new node is its "
        "name, not known before launch: kubernetes.io/hostname In [node-7] cannot be met")


def test_a_custom_requirement_left_open_gives_no_label():
    # the Provisioner allows any team: a new node gets no team label, so Exists cannot be met
    open_team = provisioner(requirements=AMD64_OD + (("team", "Exists", ()),))
    plan = run([requiring("p", ("team", "Exists"))], [open_team])
    assert plan.new_nodes == ()
    assert plan.unschedulable[0].reason == (
        "provisioner default: incompatible requirements, label team would not be on a new node: "
        "team Exists gives it no value")
    # naming values gives the node one
    plan = run([requiring("p", ("team", "In", "blue", "red"))], [open_team])
    assert plan.new_nodes[0].labels["team"] == "blue"


def test_a_provisioner_requirement_with_several_values_labels_the_node_with_one():
    teams = provisioner(requirements=AMD64_OD + (("team", "In", ("blue", "red")),))
    plan = run([requiring("any", ("team", "Exists"))], [teams])
    assert plan.new_nodes[0].labels["team"] == "blue"
    plan = run([requiring("red", ("team", "In", "red", "green"))], [teams])
    assert plan.new_nodes[0].labels["team"] == "red"


def test_existing_nodes_are_judged_by_the_labels_they_have():
    def node(name, labels):
        return ClusterNode(name=name, labels=labels, allocatable=Resources({"cpu": 4000, "pods": 58}),
                           requested=Resources({"pods": 1}))

    plain = node("plain", {"node.kubernetes.io/instance-type": "m5.xlarge"})
    disk = node("disk", {"node.kubernetes.io/instance-type": "m5d.xlarge", NVME: "150"})
    plan = run([requiring("needs-disk", (NVME, "Exists")), requiring("no-disk", (NVME, "DoesNotExist"))],
               nodes=[disk, plain])
    assert sorted((e.node, [p.name for p in e.pods]) for e in plan.existing) == [
        ("disk", ["needs-disk"]), ("plain", ["no-disk"])]
    assert plan.new_nodes == ()


def test_the_labels_a_launched_node_carries_meet_every_pod_planned_for_it():
    """For random requirements, the Node the controller writes (``node_labels``, with the settings' labels
    for every node) meets each pod on it, whichever of the node's options and offerings is launched."""
    rng = random.Random(12)
    keys = [(NVME, ["125", "150", "300"]), (FAMILY, ["m5", "m5d", "m5dn", "g4dn"]),
            ("team", ["blue", "red"]), ("topology.kubernetes.io/zone", ["ap-south-1a", "ap-south-1b"]),
            ("kubernetes.io/hostname", ["old-node"]), ("site", ["x", "y"])]
    teams = provisioner(requirements=AMD64_OD + (("team", "In", ("blue", "red")),), labels=[("env", "prod")])
    settings_labels = {"site": "x", "team": "green"}  # the Provisioner names team: its own values win
    pods = []
    for i in range(120):
        expressions = []
        for key, values in rng.sample(keys, rng.randint(1, 3)):
            operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
            if operator in ("Gt", "Lt"):
                if key != NVME:
                    continue
                expressions.append((key, operator, rng.choice(["140", "200"])))
            elif operator in ("In", "NotIn"):
                expressions.append((key, operator, *rng.sample(values, rng.randint(1, len(values)))))
            else:
                expressions.append((key, operator))
        pods.append(requiring(f"p{i}", *expressions, gpu=rng.random() < 0.2))
    plan = run(pods, [teams], node_labels=settings_labels)
    assert len(plan.new_nodes) > 5 and len(plan.unschedulable) > 5  # both outcomes are exercised
    for planned in plan.new_nodes:
        for option in planned.instance_type_options:
            for offering in option.available_offerings(planned.requirements):
                machine = Machine(provider_id="aws:///x/i-1", instance_id="i-1", name="ip-10-0-0-1",
                                  instance_type=option.name, zone=offering.zone,
                                  capacity_type=offering.capacity_type)
                labels = node_labels(teams, machine, option, planned.labels, settings_labels)
                for p in planned.pods:
                    assert any((p.base_requirements & term).mismatch(labels) is None
                               for term in p.required_node_affinity), (p.name, option.name, labels)
