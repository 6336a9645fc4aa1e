"""The plan of Karpenter's scale test "basic" offline: what ``groupless plan`` launches for it.

    .venv/bin/python -m benchmarks.basic_plan [--pods 1000] [--repeat 5] [--write DIR]

The workload and Provisioner of :mod:`benchmarks.scale_out` (half the pods 900m / 3100Mi, half
3500m / 28Gi; no DaemonSets) over the kwok catalog (the local cluster's instance types, offerings
and prices), read and solved as ``groupless plan`` does (:func:`provisioner.plan.read_inputs`,
``read_catalog``, ``build_input``, then :func:`~provisioner.scheduling.solver.solve`). Prints the
plan's nodes, USD/hour, instance types (cheapest option, pods on it) and utilisation: per node,
its pods' requests over the allocatable of its cheapest option, averaged over nodes (the figure
scale_out reads from the cluster), and the solve's seconds (the least of ``--repeat`` solves;
note the load average beside it). ``--write DIR`` also writes ``DIR/basic.yaml`` for timing the
whole command::

    .venv/bin/groupless plan -f DIR/basic.yaml --instance-types provisioner/cloudprovider/data/kwok-instance-types.json \\
        --offerings provisioner/cloudprovider/data/kwok-offerings.json \\
        --pricing-file provisioner/cloudprovider/data/kwok-prices.json -o json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from benchmarks.scale_out import deployments, provisioner_manifest
from provisioner import plan as groupless_plan
from provisioner.cloudprovider.kwok import DEFAULT_INSTANCE_TYPES, DEFAULT_OFFERINGS, DEFAULT_PRICES
from provisioner.model.resources import CPU, MEMORY
from provisioner.scheduling.solver import Plan, SolverInput, solve


def write_workload(directory: Path, pods: int) -> Path:
    """``directory/basic.yaml``: the Provisioner and both Deployments."""
    path = directory / "basic.yaml"
    path.write_text(yaml.safe_dump_all([provisioner_manifest(), *deployments(pods, None)], sort_keys=False))
    return path


def solver_input(workload: Path) -> SolverInput:
    """The solver input ``groupless plan`` builds from ``workload`` and the kwok catalog files."""
    args = argparse.Namespace(
        file=[str(workload)], instance_types=str(DEFAULT_INSTANCE_TYPES), offerings=str(DEFAULT_OFFERINGS),
        pricing_file=str(DEFAULT_PRICES), region=None, aws_endpoint_url=None, eni_limited_pod_density=True,
        output="json")
    inputs = groupless_plan.read_inputs(args.file)
    catalog = groupless_plan.read_catalog(args, inputs.provisioners, [])
    return groupless_plan.build_input(inputs, catalog.instance_types)


def utilisation(plan: Plan) -> tuple[float, float]:
    """Mean over the new nodes of requested / allocatable (cpu, memory) on each node's cheapest option."""
    cpu: list[float] = []
    memory: list[float] = []
    for node in plan.new_nodes:
        allocatable = node.instance_type.allocatable
        for name, values in ((CPU, cpu), (MEMORY, memory)):
            requested = sum(p.requests.get(name) for p in node.pods)
            values.append(requested / allocatable.get(name))
    return (statistics.fmean(cpu) if cpu else 0.0), (statistics.fmean(memory) if memory else 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=1000, help="pods in all, half of each shape (default 1000)")
    parser.add_argument("--repeat", type=int, default=5, help="solves timed; the least is printed (default 5)")
    parser.add_argument("--write", type=Path, help="also write DIR/basic.yaml (for timing groupless plan)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.write or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        given = solver_input(write_workload(directory, args.pods))
    seconds = []
    plan = Plan()
    for _ in range(max(1, args.repeat)):
        started = time.perf_counter()
        plan = solve(given)
        seconds.append(time.perf_counter() - started)
    cpu, memory = utilisation(plan)
    shapes = Counter((n.instance_type.name, len(n.pods)) for n in plan.new_nodes)
    print(f"{args.pods} pods: {len(plan.new_nodes)} nodes, {plan.total_price:.4f} USD/hour, "
          f"cpu {cpu:.1%}, memory {memory:.1%}, {len(plan.unschedulable)} unschedulable")
    print("nodes: " + ", ".join(f"{count}x {name} ({pods} pods)" for (name, pods), count in shapes.most_common()))
    print(f"solve: {min(seconds):.3f} s (least of {len(seconds)}; load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
