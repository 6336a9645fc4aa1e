"""A realistic workload on the real EC2 catalog: price vs lower bound vs first-fit-decreasing.

    .venv/bin/python -m benchmarks.realistic [--pods 2000] [--seed 7] [--profile]

Catalog: moto's EC2 data for ap-south-1 (``moto/ec2/resources``: DescribeInstanceTypes items
and the ap-south-1 availability-zone offerings), converted by the AWS provider's own
``instance_types_from_ec2`` and priced from ``benchmarks/fixtures/ap-south-1-prices.json``
(on-demand and spot; moto's spot prices are placeholders). Only priced types are kept.

Workload (fixed seed): 2,000 pods under the walkthrough's Provisioner (spot + on-demand,
arm64 + amd64, limits cpu 1000): 70% web pods (50m-500m CPU, 64Mi-1Gi, zone spread
ScheduleAnyway), 28% batch pods (250m-2 CPU, 512Mi-8Gi), 2% GPU pods (1 nvidia.com/gpu, 1-2
CPU, 4-8Gi), about 750 vCPU of requests so that the limit (which counts node capacity) holds,
plus two DaemonSets (a log agent on every node, a GPU device plugin on GPU nodes).
Prints price, the lower bound (see ``benchmarks.bounds``), plain FFD, time and peak memory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import moto

from benchmarks.bounds import ffd_price, lower_bound, lp_bound, pod_share_bound, resource_bound
from benchmarks.timing import timed_solve
from provisioner.api.defaults import default_provisioner
from provisioner.api.schemas import load_provisioner
from provisioner.cloudprovider.aws.catalog import instance_types_from_ec2, load_pricing_file
from provisioner.model.resources import MIB
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.solver import solve_first_fit
from provisioner.state.cluster import snapshot_of
from provisioner.state.solverinput import build_solver_input

REGION = "ap-south-1"
PRICES = Path(__file__).parent / "fixtures" / "ap-south-1-prices.json"
WALKTHROUGH_PROVISIONER = {
    "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
        ],
        "limits": {"resources": {"cpu": "1000"}},
        "provider": {"subnetSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
                     "securityGroupSelector": {"kubernetes.io/cluster/karpenter-demo": "*"}},
        "ttlSecondsAfterEmpty": 30,
    },
}


def moto_catalog() -> list[InstanceType]:
    root = Path(os.path.dirname(moto.__file__)) / "ec2" / "resources"
    with gzip.open(root / "instance_types.json.gz") as f:
        infos = json.load(f)
    with gzip.open(root / "instance_type_offerings" / "availability-zone" / f"{REGION}.json.gz") as f:
        offerings = json.load(f)
    book = load_pricing_file(PRICES, REGION)
    priced = set(book.on_demand)
    return instance_types_from_ec2([i for n, i in infos.items() if n in priced], offerings, book)


def workload(n: int, rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        roll = rng.random()
        spec: dict[str, Any] = {}
        if roll < 0.70:
            kind, labels = "web", {"app": f"web-{rng.randrange(10)}"}
            requests = {"cpu": rng.choice(["50m", "100m", "250m", "500m"]),
                        "memory": rng.choice(["64Mi", "128Mi", "256Mi", "512Mi", "1Gi"])}
            spec["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": labels}}]
            resources = {"requests": requests}
        elif roll < 0.98:
            kind, labels = "batch", {"app": "batch"}
            resources = {"requests": {"cpu": rng.choice(["250m", "500m", "1", "2"]),
                                      "memory": rng.choice(["512Mi", "1Gi", "2Gi", "4Gi", "8Gi"])}}
        else:
            kind, labels = "gpu", {"app": "train"}
            resources = {"requests": {"cpu": rng.choice(["1", "2"]), "memory": rng.choice(["4Gi", "8Gi"])},
                         "limits": {"nvidia.com/gpu": "1"}}
        spec["containers"] = [{"name": "main", "image": "x", "resources": resources}]
        pods.append({"metadata": {"name": f"{kind}-{i}", "namespace": "default", "uid": f"uid-{i}",
                                  "labels": labels}, "spec": spec})
    return pods


DAEMONSETS = [
    {"metadata": {"name": "log-agent", "namespace": "kube-system", "uid": "ds-1"},
     "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}], "containers": [
         {"name": "agent", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}},
    {"metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system", "uid": "ds-2"},
     "spec": {"template": {"spec": {"nodeSelector": {"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia"},
                                    "containers": [{"name": "plugin", "resources": {"requests": {"cpu": "50m"}}}]}}}},
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    types = moto_catalog()
    provisioner = load_provisioner(default_provisioner(WALKTHROUGH_PROVISIONER))
    manifests = workload(args.pods, random.Random(args.seed))
    snapshot = snapshot_of(pods=manifests, provisioners=[provisioner], daemonsets=DAEMONSETS)
    given = build_solver_input(snapshot, {}, manifests, {"default": types}, now=0.0).input
    pods, daemonsets = list(given.pods), list(given.daemonsets)
    plan, elapsed, peak = timed_solve(given, args.profile)
    placed = [p for n in plan.new_nodes for p in n.pods]
    every_node = daemonsets[0].requests - {"pods": 0}  # the log agent tolerates everything: on every node
    bound = lower_bound(placed, types, every_node)
    ffd_plan = solve_first_fit(given)
    ffd = ffd_plan.total_price
    ffd062 = ffd_price(placed, types)
    print(f"catalog: {len(types)} instance types in {REGION}; pods: {len(pods)}; "
          f"placed {len(placed)}, unschedulable {len(plan.unschedulable)}")
    if plan.unschedulable:
        print(f"  first unschedulable: {plan.unschedulable[0].pod.key}: {plan.unschedulable[0].reason}")
    counts: dict[str, int] = {}
    for n in plan.new_nodes:
        key = f"{n.instance_type.name}/{n.offering.capacity_type}"
        counts[key] = counts.get(key, 0) + 1
    print("nodes: " + ", ".join(f"{v}x {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"seconds {elapsed:.2f}  pods/s {len(pods) / elapsed:.0f}  nodes {len(plan.new_nodes)}  "
          f"peak MiB {peak / MIB:.1f}")
    ffd_placed = sum(len(n.pods) for n in ffd_plan.new_nodes)
    print(f"price $/h {plan.total_price:.4f}  lower bound $/h {bound:.4f} ({plan.total_price / bound - 1:+.1%})")
    for name, value in (("per-resource (the target's)", resource_bound(placed, types)),
                        ("fractional-node LP", lp_bound(placed, types, every_node)),
                        ("pod share", pod_share_bound(placed, types, every_node))):
        print(f"  {name} bound $/h {value:.4f} ({plan.total_price / value - 1:+.1%})")
    print(f"first-fit-decreasing (same constraints) $/h {ffd:.4f} for {ffd_placed} pods "
          f"({len(ffd_plan.new_nodes)} nodes, {len(ffd_plan.unschedulable)} unschedulable); "
          f"v0.6.3 packer on the pods placed here $/h {ffd062:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
