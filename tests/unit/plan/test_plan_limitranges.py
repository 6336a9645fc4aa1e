"""``groupless plan`` sizes the pods of its manifests with their namespace's LimitRange defaults, as admission would."""

import json

from tests.unit.plan.test_plan import SOURCE, WALKTHROUGH_PROVISIONER, run, write

LIMIT_RANGE = """
apiVersion: v1
kind: LimitRange
metadata: {name: defaults, namespace: team}
spec:
  limits:
    - type: Container
      default: {cpu: "1", memory: 1Gi}
"""
# No requests: admitted in namespace team, each container requests the default limit (1 cpu, 1Gi).
INFLATE_WITHOUT_REQUESTS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: team}
spec:
  replicas: 3
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      nodeSelector:
        node.kubernetes.io/instance-type: r6gd.xlarge
        karpenter.sh/capacity-type: on-demand
        topology.kubernetes.io/zone: ap-south-1a
      containers:
        - {name: inflate, image: pause}
"""
AGENT_WITHOUT_REQUESTS = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: team}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - {name: agent, image: agent}
"""
R6GD_XLARGE = {"provisioner": "default", "instanceTypes": ["r6gd.xlarge"], "zone": "ap-south-1a",
               "capacityType": "on-demand", "pricePerHour": 0.2304}


def test_a_deployment_and_a_daemonset_without_requests_get_the_limit_range_defaults(tmp_path, capsys):
    provisioner = write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER)
    workloads = write(tmp_path, "w.yaml", INFLATE_WITHOUT_REQUESTS + "---" + AGENT_WITHOUT_REQUESTS)
    code, out, err = run(capsys, provisioner, workloads)
    assert code == 0, err
    # without the LimitRange every pod requests nothing: one node for all three
    assert json.loads(out)["nodes"] == [{**R6GD_XLARGE, "pods": ["team/inflate-0", "team/inflate-1", "team/inflate-2"]}]

    limits = write(tmp_path, "l.yaml", LIMIT_RANGE)  # after the workloads: read before any pod is sized
    code, out, err = run(capsys, provisioner, workloads, limits)
    assert code == 0, err
    # r6gd.xlarge has 3820m allocatable: the agent's 1 cpu and two 1-cpu pods fit, three do not
    assert json.loads(out) == {
        "region": "ap-south-1", "priceSource": SOURCE, "estimatedPrices": [],
        "nodes": [{**R6GD_XLARGE, "pods": ["team/inflate-0", "team/inflate-1"]},
                  {**R6GD_XLARGE, "pods": ["team/inflate-2"]}],
        "existing": [], "unschedulable": [], "totalPricePerHour": 0.4608,
    }


def test_a_limit_range_of_another_namespace_or_an_admitted_pod_change_nothing(tmp_path, capsys):
    provisioner = write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER)
    elsewhere = write(tmp_path, "l.yaml", LIMIT_RANGE.replace("namespace: team", "namespace: other"))
    workloads = write(tmp_path, "w.yaml", INFLATE_WITHOUT_REQUESTS)
    code, out, err = run(capsys, provisioner, workloads, elsewhere)
    assert code == 0, err
    assert [len(n["pods"]) for n in json.loads(out)["nodes"]] == [3]

    # pods read from a cluster (creationTimestamp set) went through admission already
    admitted = "".join(f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, namespace: team, creationTimestamp: "2026-01-01T00:00:00Z"}}
spec:
  nodeSelector: {{node.kubernetes.io/instance-type: r6gd.xlarge, karpenter.sh/capacity-type: on-demand,
                 topology.kubernetes.io/zone: ap-south-1a}}
  containers: [{{name: web, image: pause}}]
""" for i in range(3))
    code, out, err = run(capsys, provisioner, write(tmp_path, "pods.yaml", admitted), write(tmp_path, "t.yaml",
                                                                                              LIMIT_RANGE))
    assert code == 0, err
    assert json.loads(out)["nodes"] == [{**R6GD_XLARGE, "pods": ["team/web-0", "team/web-1", "team/web-2"]}]


def test_a_malformed_limit_range_names_its_file_document_and_field(tmp_path, capsys):
    bad = write(tmp_path, "l.yaml", "---\n" + LIMIT_RANGE.replace('cpu: "1"', "cpu: plenty"))
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), bad)
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith(
        f"error: {bad}: document 1: LimitRange team/defaults: spec.limits[0].default.cpu: invalid quantity 'plenty'")
