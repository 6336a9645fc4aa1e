"""Cost of Groupless' observability on hot paths: time_call per request, gauge refresh and /metrics.

The extender answers kube-scheduler within its 5 s timeout and usually in milliseconds, so the
metrics wrapped around each request must cost microseconds; the state gauges are refreshed at
every scrape from the cluster cache's node views, so that must stay well under a scrape
interval for large clusters. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/observability.py [--nodes 1000] [--pods-per-node 30]
"""

from __future__ import annotations

import argparse
import io
import logging
import time
from collections.abc import Callable
from typing import Any

from provisioner import metrics
from provisioner.logging import configure_logging, object_logger
from provisioner.state.cluster import snapshot_of
from provisioner.state.nodes import NodeViews


def per_call(fn: Callable[[], object], n: int) -> float:
    """Mean seconds per call of ``fn`` over ``n`` calls."""
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    args = parser.parse_args()

    def timed() -> None:
        with metrics.time_call(metrics.EXTENDER_DURATION, verb="filter") as labels:
            labels["code"] = "200"

    print(f"time_call around a request:        {per_call(timed, 20000) * 1e6:8.1f} us/call")
    configure_logging("info", "json", stream=io.StringIO())
    log = object_logger(logging.getLogger("bench"), ("Pod", "default", "inflate-0"), node="ip-1")
    seconds = per_call(lambda: log.info("Batched %d pods in %.2fs", 3, 1.05), 20000)
    print(f"JSON log line with object fields:  {seconds * 1e6:8.1f} us/line")

    nodes = [{"metadata": {"name": f"ip-{i}", "labels": {"karpenter.sh/provisioner-name": "default"}},
              "status": {"allocatable": {"cpu": "3820m", "memory": "29217Mi", "pods": "58"}}} for i in range(args.nodes)]
    def pod(uid: str) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "resourceVersion": "1"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                "status": {"phase": "Running"}}

    pods = [{**pod(f"{i}-{j}"), "spec": {**pod(f"{i}-{j}")["spec"], "nodeName": f"ip-{i}"}}
            for i in range(args.nodes) for j in range(args.pods_per_node)]
    provisioners = [{"metadata": {"name": "default"}, "spec": {"limits": {"resources": {"cpu": "10000"}}},
                     "status": {"resources": {"cpu": "4000"}}}]
    views = NodeViews()
    started = time.perf_counter()
    metrics.update_cluster_gauges(views.nodes(snapshot_of(nodes=nodes, pods=pods)).values(), provisioners)
    refresh = time.perf_counter() - started
    started = time.perf_counter()
    body, _ = metrics.exposition()
    scrape = time.perf_counter() - started
    started = time.perf_counter()
    metrics.update_cluster_gauges(views.nodes(snapshot_of(nodes=nodes, pods=pods)).values(), provisioners)
    again = time.perf_counter() - started
    print(f"gauge refresh, {args.nodes} nodes x {args.pods_per_node} pods: first {refresh * 1e3:.0f} ms, "
          f"then {again * 1e3:.0f} ms (node views reused: same objects)")
    print(f"/metrics exposition ({len(body) / 1024:.0f} KiB):      {scrape * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
