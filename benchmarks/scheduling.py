"""Karpenter's scheduling benchmark, re-created for Groupless's solver.

    .venv/bin/python -m benchmarks.scheduling [N ...] [--profile]

Fixture (Karpenter ``scheduling_benchmark_test.go``): 400 instance types ``fake-it-i`` with
(i+1) vCPU, 2(i+1) GiB, 10(i+1) pods, 100m/10Mi kube-reserved, price 0.1/vCPU + 0.1/GB, spot
offerings in zones 1-2 and on-demand in zones 1-3; one Provisioner without requirements or
limits; pods in five equal groups (plain; zone spread maxSkew 1; hostname spread maxSkew 1;
zone self-affinity; hostname anti-affinity) with cpu from {100m, 250m, 500m, 1000m, 1500m}
and memory from {100, 256, 512, 1024, 2048, 4096} Mi, seed 42. Only ``solve()`` is timed.
Prints pods/s, nodes, total price, the cost lower bound (the larger of the per-resource bound
and the forced-nodes bound of the hostname anti-affinity group), first-fit-decreasing over the same
constraints (``solve_first_fit``), Karpenter v0.6.3's packer (no topology: not comparable when
anti-affinity forces nodes) and the peak memory of the solve (tracemalloc).
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from benchmarks.bounds import ffd_price, lower_bound
from benchmarks.timing import timed_solve
from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.model.resources import GIB, MIB, Resources
from provisioner.scheduling.instancetypes import InstanceType, Offering
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.solver import solve_first_fit
from provisioner.state.cluster import snapshot_of
from provisioner.state.solverinput import build_solver_input

LABELS = "abcdefg"


def fake_instance_types(count: int = 400) -> list[InstanceType]:
    types = []
    for i in range(count):
        cpu, mem = i + 1, 2 * (i + 1) * GIB
        price = 0.1 * cpu + 0.1 * mem / 1e9
        offerings = tuple(
            [Offering(f"test-zone-{z}", "spot", price) for z in (1, 2)]
            + [Offering(f"test-zone-{z}", "on-demand", price) for z in (1, 2, 3)]
        )
        types.append(InstanceType(
            name=f"fake-it-{i}", arch="amd64",
            capacity=Resources({"cpu": cpu * 1000, "memory": mem, "pods": 10 * (i + 1)}),
            overhead=Resources({"cpu": 100, "memory": 10 * MIB}), offerings=offerings,
        ))
    return types


def diverse_pods(n: int, rng: random.Random) -> list[dict[str, Any]]:
    cpus = ["100m", "250m", "500m", "1000m", "1500m"]
    mems = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
    per = n // 5
    pods: list[dict[str, Any]] = []

    def base(i: int, labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": f"pod-{i}", "namespace": "default", "uid": f"uid-{i}", "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": rng.choice(cpus), "memory": rng.choice(mems)}}}], **spec},
        }

    def spread(key: str) -> dict[str, Any]:
        return {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"my-label": rng.choice(LABELS)}}}]}

    i = 0
    for _ in range(per):
        pods.append(base(i, {"my-label": rng.choice(LABELS)}, {}))
        i += 1
    for _ in range(per):
        pods.append(base(i, {"my-label": rng.choice(LABELS)}, spread("topology.kubernetes.io/zone")))
        i += 1
    for _ in range(per):
        pods.append(base(i, {"my-label": rng.choice(LABELS)}, spread("kubernetes.io/hostname")))
        i += 1
    for _ in range(per):
        value = rng.choice(LABELS)
        pods.append(base(i, {"my-affininity": value}, {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"my-affininity": value}},
                "topologyKey": "topology.kubernetes.io/zone"}]}}}))
        i += 1
    for _ in range(per):
        pods.append(base(i, {"app": "nginx"}, {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "nginx"}},
                "topologyKey": "kubernetes.io/hostname"}]}}}))
        i += 1
    while i < n:
        pods.append(base(i, {"my-label": rng.choice(LABELS)}, {}))
        i += 1
    return pods


def forced_nodes_bound(pods: list[Pod], types: list[InstanceType]) -> float:
    """Pods with required hostname anti-affinity against each other need a node each: the sum of
    the cheapest type that holds each one alone is also a lower bound (the plan takes the max)."""
    total = 0.0
    for pod in pods:
        if any(t.topology_key == "kubernetes.io/hostname" and t.selector.matches(pod.labels)
               for t in pod.pod_anti_affinity):
            total += min(offering.price for t in types if pod.requests.fits(t.allocatable)
                         if (offering := t.cheapest_offering()) is not None)
    return total


def run(n: int, profile: bool = False, with_ffd: bool = True) -> dict[str, Any]:
    rng = random.Random(42)
    types = fake_instance_types()
    manifests = diverse_pods(n, rng)
    provisioner = Provisioner(name="default", spec=ProvisionerSpec())
    snapshot = snapshot_of(pods=manifests, provisioners=[provisioner])
    given = build_solver_input(snapshot, {}, manifests, {"default": types}, now=0.0).input
    pods = list(given.pods)
    plan, elapsed, peak = timed_solve(given, profile)
    if plan.unschedulable:
        print(f"  {len(plan.unschedulable)} pods unschedulable, first: {plan.unschedulable[0].reason}")
    result = {
        "pods": n, "seconds": elapsed, "pods_per_s": n / elapsed, "nodes": len(plan.new_nodes),
        "price": plan.total_price, "bound": max(lower_bound(pods, types), forced_nodes_bound(pods, types)),
        "peak_mib": peak / MIB,
    }
    if with_ffd:
        result["ffd"] = solve_first_fit(given).total_price
        result["ffd062"] = ffd_price(pods, types)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 5000, 20000])
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each solve to stderr")
    parser.add_argument("--no-ffd", action="store_true", help="skip the first-fit-decreasing baseline")
    args = parser.parse_args(argv)
    print(f"{'pods':>6} {'seconds':>8} {'pods/s':>8} {'nodes':>6} {'$/h':>9} {'bound $/h':>9} "
          f"{'FFD $/h':>9} {'v0.6.3 $/h':>10} {'peak MiB':>8}")
    for n in args.sizes:
        r = run(n, args.profile, not args.no_ffd)
        ffd = f"{r['ffd']:9.2f} {r['ffd062']:10.2f}" if "ffd" in r else f"{'-':>9} {'-':>10}"
        print(f"{r['pods']:>6} {r['seconds']:8.2f} {r['pods_per_s']:8.0f} {r['nodes']:>6} {r['price']:9.2f} "
              f"{r['bound']:9.2f} {ffd} {r['peak_mib']:8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
