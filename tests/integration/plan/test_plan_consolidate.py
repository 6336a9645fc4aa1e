"""``groupless plan --consolidate`` as a user runs it: a process, manifests of Nodes and bound Pods, a file catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.plan.test_plan import FIXTURES, OFFERINGS, PRICING

PROVISIONER = {
    "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"},
    "spec": {"consolidation": {"enabled": True},
             "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                              {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
             "provider": {"subnetSelector": {"karpenter.sh/discovery": "demo"},
                          "securityGroupSelector": {"karpenter.sh/discovery": "demo"}}},
}


def node(name: str) -> dict[str, Any]:
    """An m5.xlarge of the Provisioner, Ready, as ``kubectl get node -o yaml`` shows it (no price annotation)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "karpenter.sh/provisioner-name": "default", "node.kubernetes.io/instance-type": "m5.xlarge",
        "topology.kubernetes.io/zone": "ap-south-1a", "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name}},
        "status": {"capacity": {"cpu": "4", "memory": "15300Mi", "pods": "58"},
                   "allocatable": {"cpu": "3920m", "memory": "14000Mi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str, *, owned: bool = True) -> dict[str, Any]:
    """A Running pod of 1 CPU and 1Gi bound to ``node_name`` (owned by a ReplicaSet unless ``owned`` is False)."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if owned:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                                        "uid": "rs-1", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "pause", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def groupless_plan(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "provisioner.cli", "plan", "--consolidate", "-f", str(path),
         "--instance-types", str(FIXTURES / "instance-types.json"), "--offerings", str(OFFERINGS),
         "--pricing-file", str(PRICING), "--region", "ap-south-1", *extra],
        capture_output=True, text=True, timeout=120, check=False)


NAMES = [f"ip-10-0-0-{i}.ap-south-1.compute.internal" for i in (1, 2, 3)]


def test_three_underused_nodes_become_one_cheaper_node(tmp_path: Path) -> None:
    docs = [PROVISIONER, *[node(n) for n in NAMES], *[pod(f"web-{i}", n) for i, n in enumerate(NAMES, 1)]]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = groupless_plan(path, "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(m["kind"], m["nodes"], m["pods"], m["savingsPerHour"]) for m in result["moves"]] == [
        ("delete", NAMES[:2], 2, 0.404),  # their pods fit on the third node
        ("replace", NAMES[2:], 3, 0.032),  # three 1-CPU pods on a c5.xlarge (0.17) instead of an m5.xlarge (0.202)
    ]
    assert [(r["instanceType"], r["capacityType"], r["pricePerHour"], r["pods"])
            for r in result["moves"][1]["replacements"]] == [
        ("c5.xlarge", "on-demand", 0.17, ["default/web-1", "default/web-2", "default/web-3"])]
    assert (result["before"], result["after"], result["savingsPerHour"]) == (
        {"nodes": 3, "pricePerHour": 0.606}, {"nodes": 1, "pricePerHour": 0.17}, 0.436)
    assert result["kept"] == []


def test_table_names_the_nodes_kept_and_why(tmp_path: Path) -> None:
    docs = [PROVISIONER, *[node(n) for n in NAMES[:2]], pod("web-1", NAMES[0]), pod("bare", NAMES[1], owned=False)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = groupless_plan(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        f"1. delete 1 node(s) ({NAMES[0]}): 1 pod(s) move, 0.2020 -> 0.0000 USD/hour, saves 0.2020 USD/hour",
        f"Kept {NAMES[1]}: pod default/bare has no controller (it would not be recreated)",
        "Total: 2 node(s) at $0.4040/hour -> 1 node(s) at $0.2020/hour, saves $0.2020/hour in 1 move(s)",
    ]


def test_a_budget_that_allows_no_disruption_keeps_the_node(tmp_path: Path) -> None:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}
    docs = [PROVISIONER, *[node(n) for n in NAMES[:2]], pod("web-1", NAMES[0]), pod("web-2", NAMES[1]), budget]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = groupless_plan(path, "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["moves"] == []
    assert result["kept"] == [
        {"node": name, "reason": f"PodDisruptionBudget default/web allows no disruption of pod default/web-{i} now"}
        for i, name in enumerate(NAMES[:2], 1)]
