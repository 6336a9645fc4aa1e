"""The differential benchmark: how often kube-scheduler binds a pod where the plan put it.

    .venv/bin/python -m benchmarks.differential [--workloads 50] [--pods 100] [--first-seed 1000]

Runs the differential harness (:mod:`localcluster.differential`) on one local cluster of its
own (webhook and extender, no Groupless controller; stopped at the end): for each seeded
workload, the production builder and solver plan it, the planned nodes are launched on kwok
as the provisioning controller launches them, kube-scheduler (with the extender) binds the
pods, and each pod is judged by the agreement rule. Prints one line per workload, every
disagreement with its cause, and the agreement rate over all pods, with the load average.
The e2e test ``tests/e2e/test_12_differential.py`` runs a fixed set of smaller workloads that
must agree 100 %.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter

from localcluster.cluster import LocalCluster, Settings
from localcluster.differential.driver import Driver, DriverError, describe
from localcluster.differential.workload import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.differential", description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50, help="seeded workloads to run (default 50)")
    parser.add_argument("--pods", type=int, default=100, help="pods per workload (default 100)")
    parser.add_argument("--first-seed", type=int, default=1000, help="seed of the first workload (default 1000)")
    parser.add_argument("--name", default=f"differential-bench-{os.getpid()}", help="local cluster name")
    parser.add_argument("--verbose", action="store_true", help="print each step of each workload")
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.name, Settings(cloud_provider="kwok", controller=False))
    started = time.monotonic()
    cluster.up()
    print(f"cluster up in {time.monotonic() - started:.1f}s; load average {os.getloadavg()[0]:.2f}", flush=True)
    driver = Driver(cluster, progress=print if args.verbose else None)
    agreed = total = nodes = 0
    kinds: Counter[str] = Counter()
    errors: list[str] = []
    loads: list[float] = []
    t0 = time.monotonic()
    try:
        for seed in range(args.first_seed, args.first_seed + args.workloads):
            workload = generate(seed, args.pods)
            w0 = time.monotonic()
            try:
                outcome = driver.run(workload)
            except DriverError as error:
                errors.append(f"seed {seed}: {error}")
                print(f"seed {seed}: ERROR {error}", flush=True)
                continue
            loads.append(os.getloadavg()[0])
            agreed += outcome.agreement.agreed
            total += outcome.agreement.total
            nodes += len(outcome.launched)
            kinds.update(v.kind for v in outcome.agreement.verdicts)
            print(f"{describe(outcome)}\n  ({time.monotonic() - w0:.1f}s, load {loads[-1]:.2f})", flush=True)
    finally:
        driver.close()
        cluster.down(quiet=True)
        shutil.rmtree(cluster.directory, ignore_errors=True)
    elapsed = time.monotonic() - t0
    rate = agreed / total if total else 1.0
    print(f"\nagreement: {agreed}/{total} pods ({100 * rate:.2f} %) over {args.workloads - len(errors)} workload(s) "
          f"of {args.pods} pods; {nodes} node(s) launched; {elapsed:.0f}s; load average "
          f"{min(loads, default=0):.2f}-{max(loads, default=0):.2f} (mean {sum(loads) / max(len(loads), 1):.2f})")
    print("verdicts by kind (see localcluster/differential/agreement.py): "
          + ", ".join(f"{kind} {count}" for kind, count in kinds.most_common()))
    for line in errors:
        print(f"  error: {line}")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
