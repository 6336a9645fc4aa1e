"""Figures of the local control plane: start time, walkthrough scale-up latency, burst latency.

Why a script and not timed tests: the machine's load decides these numbers, so tests assert
behaviour and this prints figures to compare runs (``python -m localcluster.benchmark``).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

from localcluster.cluster import LocalCluster, Settings
from localcluster.walkthrough import Observer, load_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=200, help="pods in the burst (4 sizes, default 200)")
    parser.add_argument("--name", default="benchmark")
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.name, Settings())
    started = time.monotonic()
    cluster.up()
    print(f"cluster start (warm binaries): {time.monotonic() - started:.1f}s")
    try:
        watch = Observer(cluster)
        watch.apply(load_manifest("01-provisioner.yaml"))
        watch.apply(load_manifest("02-inflate-deployment.yaml"))
        t0 = time.monotonic()
        watch.scale("inflate", 3)
        watch.wait_for(lambda: len(watch.running(watch.pods())) == 3, 300, "3 inflate pods Running")
        print(f"walkthrough scale to 3 -> Running: {time.monotonic() - t0:.1f}s on {len(watch.nodes())} node(s)")
        watch.scale("inflate", 0)

        sizes = (("100m", "128Mi"), ("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"))
        t0 = time.monotonic()
        for index, (cpu, memory) in enumerate(sizes):
            deployment = copy.deepcopy(load_manifest("02-inflate-deployment.yaml"))
            deployment["metadata"]["name"] = f"bench-{index}"
            deployment["spec"]["replicas"] = args.pods // len(sizes) + (1 if index < args.pods % len(sizes) else 0)
            deployment["spec"]["selector"]["matchLabels"] = {"app": f"bench-{index}"}
            template = deployment["spec"]["template"]
            template["metadata"]["labels"] = {"app": f"bench-{index}", "bench": "true"}
            template["spec"].pop("nodeSelector")
            template["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": memory}
            watch.apply(deployment)
        watch.wait_for(lambda: len(watch.running(watch.pods("bench=true"))) == args.pods, 600,
                       f"{args.pods} pods Running", interval=1)
        nodes = watch.nodes("default")
        types: dict[str, int] = {}
        for node in nodes:
            kind = node["metadata"]["labels"].get("node.kubernetes.io/instance-type", "?")
            types[kind] = types.get(kind, 0) + 1
        print(f"burst of {args.pods} pods -> Running: {time.monotonic() - t0:.1f}s on {len(nodes)} node(s) "
              f"({', '.join(f'{n}x {t}' for t, n in sorted(types.items()))}); instances launched: "
              f"{len(watch.instances())}")
    finally:
        cluster.down(quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
