"""``groupless plan`` offers a Provisioner only the instance types its amiFamily has an image for, and says which it left out."""

import json

from tests.unit.plan.test_plan import FIXTURES, parser, write

PROVISIONER = """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: gpu}
spec:
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: kubernetes.io/arch, operator: In, values: [arm64, amd64]}
  provider:
    amiFamily: AL2
    subnetSelector: {kubernetes.io/cluster/demo: '*'}
    securityGroupSelector: {kubernetes.io/cluster/demo: '*'}
"""
GPU_WORKLOADS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  replicas: 1
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      nodeSelector: {kubernetes.io/arch: arm64}
      containers: [{name: train, image: trainer, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  replicas: 1
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers: [{name: infer, image: server, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
NO_ARM64_GPU = "3 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs"


def plan(capsys, *files, output="json"):
    """The plan over g4dn.xlarge, g5g.xlarge/2xlarge/4xlarge (arm64, NVIDIA T4G) and m6g.large in us-east-1a."""
    argv = ["plan"]
    for path in files:
        argv += ["-f", str(path)]
    argv += ["--instance-types", str(FIXTURES / "gpu-instance-types.json"),
             "--offerings", str(FIXTURES / "gpu-offerings.json"), "--region", "us-east-1", "-o", output]
    args = parser().parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_al2_plans_no_arm64_gpu_node_and_the_plan_says_why(tmp_path, capsys):
    files = write(tmp_path, "p.yaml", PROVISIONER), write(tmp_path, "w.yaml", GPU_WORKLOADS)
    assert json.loads(plan(capsys, *files)) == {
        "region": "us-east-1", "priceSource": "static table", "estimatedPrices": [],
        "notOffered": [{"provisioner": "gpu", "reason": NO_ARM64_GPU,
                        "instanceTypes": ["g5g.2xlarge", "g5g.4xlarge", "g5g.xlarge"]}],
        # the cheapest GPU type overall is g5g.xlarge (0.42/hour): not bootable with AL2, so g4dn.xlarge
        "nodes": [{"provisioner": "gpu", "instanceTypes": ["g4dn.xlarge"], "zone": "us-east-1a",
                   "capacityType": "on-demand", "pricePerHour": 0.526, "pods": ["ml/infer-0"]}],
        "existing": [],
        "unschedulable": [{"pod": "ml/train-0", "reason": (
            "provisioner gpu: no instance type meets karpenter.sh/capacity-type In [on-demand], "
            "karpenter.sh/provisioner-name In [gpu], kubernetes.io/arch In [arm64], kubernetes.io/os In [linux], "
            "topology.kubernetes.io/zone In [us-east-1a]")}],
        "totalPricePerHour": 0.526,
    }
    table = plan(capsys, *files, output="table").splitlines()
    assert table[-2:] == [
        f"Not offered to Provisioner gpu: {NO_ARM64_GPU} (g5g.2xlarge, g5g.4xlarge, g5g.xlarge)",
        "Total: 1 new node(s) for 1 pod(s), $0.5260/hour",
    ]


def test_al2023_boots_arm64_gpu_types_and_leaves_nothing_out(tmp_path, capsys):
    files = (write(tmp_path, "p.yaml", PROVISIONER.replace("amiFamily: AL2", "amiFamily: AL2023")),
             write(tmp_path, "w.yaml", GPU_WORKLOADS))
    result = json.loads(plan(capsys, *files))
    assert "notOffered" not in result and result["unschedulable"] == []
    assert [(n["instanceTypes"][0], n["pods"]) for n in result["nodes"]] == [
        ("g5g.xlarge", ["ml/infer-0"]), ("g5g.xlarge", ["ml/train-0"])]
    assert "Not offered" not in plan(capsys, *files, output="table")
