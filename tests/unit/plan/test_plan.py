import argparse
import json
from pathlib import Path

import pytest

from provisioner import plan as plan_cli

FIXTURES = Path(__file__).parent / "fixtures"
WALKTHROUGH_PROVISIONER = """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  requirements:
    - key: "karpenter.sh/capacity-type"
      operator: In
      values: ["spot", "on-demand"]
    - key: "kubernetes.io/arch"
      operator: In
      values: ["arm64", "amd64"]
  limits:
    resources:
      cpu: 1000
  provider:
    subnetSelector:
      kubernetes.io/cluster/karpenter-demo: '*'
    securityGroupSelector:
      kubernetes.io/cluster/karpenter-demo: '*'
  ttlSecondsAfterEmpty: 30
"""
INFLATE = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
spec:
  replicas: 3
  selector:
    matchLabels: {app: inflate}
  template:
    metadata:
      labels: {app: inflate}
    spec:
      nodeSelector:
        node.kubernetes.io/instance-type: r6gd.xlarge
        karpenter.sh/capacity-type: on-demand
        topology.kubernetes.io/zone: ap-south-1a
        kubernetes.io/arch: arm64
      containers:
        - name: inflate
          image: pause
          resources:
            requests:
              cpu: 1
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate}
spec: {minAvailable: 2, selector: {matchLabels: {app: inflate}}}
"""


PRICING = FIXTURES / "pricing.json"
OFFERINGS = FIXTURES / "offerings.json"
SOURCE = f"pricing file {PRICING} over static table (us-east-1 as proxy)"


def parser():
    parser = argparse.ArgumentParser()
    plan_cli.register(parser.add_subparsers(dest="command"))
    return parser


def run(capsys, *files, output="json", region="ap-south-1", pricing=PRICING, extra=()):
    argv = ["plan"]
    for f in files:
        argv += ["-f", str(f)]
    argv += ["--instance-types", str(FIXTURES / "instance-types.json"), "--offerings", str(OFFERINGS), "-o", output]
    if pricing is not None:
        argv += ["--pricing-file", str(pricing)]
    if region is not None:
        argv += ["--region", region]
    args = parser().parse_args([*argv, *extra])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def plan_body(result):
    """The keys of a JSON plan documented in docs/plan.md (without region, priceSource, estimatedPrices)."""
    return {k: v for k, v in result.items() if k not in ("region", "priceSource", "estimatedPrices")}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_walkthrough_plan_is_one_r6gd_xlarge_on_demand_in_ap_south_1a(tmp_path, capsys):
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "i.yaml", INFLATE))
    assert code == 0, err
    assert json.loads(out) == {
        "region": "ap-south-1", "priceSource": SOURCE, "estimatedPrices": [],
        "nodes": [{"provisioner": "default", "instanceTypes": ["r6gd.xlarge"], "zone": "ap-south-1a",
                   "capacityType": "on-demand", "pricePerHour": 0.2304,
                   "pods": ["default/inflate-0", "default/inflate-1", "default/inflate-2"]}],
        "existing": [], "unschedulable": [], "totalPricePerHour": 0.2304,
    }


def test_table_output_and_directory_input(tmp_path, capsys):
    write(tmp_path, "01-provisioner.yaml", WALKTHROUGH_PROVISIONER)
    write(tmp_path, "02-inflate.yaml", INFLATE)
    code, out, _ = run(capsys, tmp_path, output="table")
    assert code == 0
    assert out.splitlines()[0] == f"Region: ap-south-1 (from --region); prices: {SOURCE}"
    assert out.splitlines()[2].split() == ["default", "r6gd.xlarge", "ap-south-1a", "on-demand", "0.2304", "3",
                                           "r6gd.xlarge"]
    assert out.splitlines()[-1] == "Total: 1 new node(s) for 3 pod(s), $0.2304/hour"


def test_unpinned_pods_take_the_cheapest_spot_offering_and_report_unschedulable(tmp_path, capsys):
    pods = """
apiVersion: v1
kind: Pod
metadata: {name: small}
spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: far}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-1a}
  containers: [{name: c, resources: {requests: {cpu: 500m}}}]
"""
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "pods.yaml", pods))
    result = json.loads(out)
    assert code == 0
    assert [(n["instanceTypes"][0], n["capacityType"], n["pricePerHour"], n["pods"]) for n in result["nodes"]] == [
        ("m6g.large", "spot", 0.0291, ["default/small"])]
    assert result["unschedulable"][0]["pod"] == "default/far"
    assert "key topology.kubernetes.io/zone" in result["unschedulable"][0]["reason"]
    assert "ap-south-1a, ap-south-1b, ap-south-1c" in result["unschedulable"][0]["reason"]


def test_existing_node_with_room_is_used(tmp_path, capsys):
    objs = """
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1
  labels: {karpenter.sh/provisioner-name: default, topology.kubernetes.io/zone: ap-south-1b}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: 3820m, memory: 15Gi, pods: "58"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata: {name: running}
spec: {nodeName: ip-10-0-0-1, containers: [{name: c, resources: {requests: {cpu: "3"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: fits}
spec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"""
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "o.yaml", objs))
    result = json.loads(out)
    assert result["existing"] == [{"node": "ip-10-0-0-1", "pods": ["default/fits"]}]
    assert [n["pods"] for n in result["nodes"]] == [["default/too-big"]]


@pytest.mark.parametrize(("text", "message"), [
    ("kind: Widget\napiVersion: x/v1\n", "document 1: unknown kind 'Widget'"),
    ("a: [\n", "not valid YAML"),
    ("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: bad}\nspec:\n  requirements:\n"
     "    - {key: kubernetes.io/arch, operator: Near, values: [arm64]}\n",
     "document 1: Provisioner bad: invalid: spec.requirements[0].operator"),
    ("---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n",
     "document 1: Pod p: spec.containers[0].resources.requests.cpu"),
])
def test_errors_name_the_file_and_document_and_print_no_plan(tmp_path, capsys, text, message):
    bad = write(tmp_path, "bad.yaml", text)
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), bad)
    assert code == 1
    assert out == ""
    assert str(bad) in err and message in err


