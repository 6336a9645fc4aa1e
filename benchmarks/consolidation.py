"""Consolidation after Karpenter's KWOK performance test "basic", phase 2: 1,000 pods scaled to 700.

    .venv/bin/python -m benchmarks.consolidation [--cloud-provider kwok|aws] [--pods 1000] [--after 700]
        [--settle-period 30] [--quiet-minutes 10] [--json FILE] [--keep]

The workload and Provisioner are :mod:`benchmarks.scale_out`'s (two Deployments, half the pods
900m / 3100Mi and half 3500m / 28Gi; the walkthrough's Provisioner without limits, fewer than 33
vCPUs) with ``consolidation: {enabled: true}`` instead of ``ttlSecondsAfterEmpty``, and a
PodDisruptionBudget of ``maxUnavailable: 10%`` on each Deployment. The benchmark starts a local
cluster of its own (``--name``, default ``consolidation-<provider>``; the controller's settle
period set by ``--settle-period``), waits for every pod Running, scales both Deployments down
to ``--after`` pods in all and starts the clock. It prints:

* the time until the node set is stable: the last change of the Provisioner's nodes (a node
  added, removed, tainted ``karpenter.sh/disrupted`` or being deleted) before a quiet window of
  :data:`STABLE_WINDOW` seconds with every remaining pod Running;
* nodes and price (USD/hour, the ``groupless.dev/price-per-hour`` annotation) before the
  scale-down, and after; the price after against the pod-share lower bound of the remaining
  pods over the Provisioner's instance types (:func:`benchmarks.bounds.pod_share_bound`);
* pods evicted (the controller's ``groupless_evictions_total{outcome="evicted"}``) and the
  consolidation moves (``groupless_consolidation_actions_total``) by kind and outcome;
* the PodDisruptionBudgets, polled every second from the scale-down to the end: the fewest
  healthy pods seen per Deployment against the budget's desired healthy count, and how many
  polls saw a budget broken;
* the controller's RSS (P95, maximum) and average CPU from the scale-down to stable;
* the consolidation moves started in the ``--quiet-minutes`` after it settled (a steady
  workload must see none).

Targets (this 2-core machine; Karpenter allows itself 20 minutes, 260 MB and 0.25 cores): stable
within 300 s, price within 10 % of the bound, no budget ever broken, no move after it settled.
The load average at the start and the end closes the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.bounds import pod_share_bound
from benchmarks.scale_out import (
    DISCOVERY_LABEL,
    MIB,
    SHAPES,
    NodeFigures,
    Sampler,
    _wait_for_instance_types,
    benchmark_cluster,
    controller_pid,
    deployments,
    node_figures,
    percentile,
    provisioner_manifest,
)
from localcluster.cluster import LocalCluster, Settings
from localcluster.walkthrough import LogCursor, Observer
from provisioner.api.schemas import load_provisioner
from provisioner.kube.client import KubeClient
from provisioner.model import objects
from provisioner.model.disruption import pod_is_healthy, scaled_value
from provisioner.scheduling.pods import pod_from_manifest
from provisioner.scheduling.provisioners import provisioner_requirements
from provisioner.state.cluster import ClusterState

#: Seconds without a change of the node set (every pod Running) that count as stable.
STABLE_WINDOW = 90.0
#: The budget on each Deployment.
MAX_UNAVAILABLE = "10%"


@dataclass(frozen=True)
class Targets:
    stable_seconds: float = 300.0
    price_over_bound: float = 1.10
    budget_violations: int = 0
    actions_after: int = 0


@dataclass
class Result:
    """Every figure of one run (``--json`` writes this)."""

    cloud_provider: str
    pods_before: int
    pods_after: int
    settle_period_seconds: float
    load_average_start: tuple[float, float, float]
    load_average_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scale_out_seconds: float | None = None
    stable_seconds: float | None = None
    before: NodeFigures = field(default_factory=NodeFigures)
    after: NodeFigures = field(default_factory=NodeFigures)
    bound_price: float = 0.0
    evicted: float = 0.0
    actions: dict[str, float] = field(default_factory=dict)
    actions_after_settled: float | None = None
    quiet_minutes: float = 0.0
    fewest_healthy: dict[str, int] = field(default_factory=dict)
    desired_healthy: dict[str, int] = field(default_factory=dict)
    budget_violations: int = 0
    polls: int = 0
    controller_p95_rss_mib: float = 0.0
    controller_max_rss_mib: float = 0.0
    controller_average_cores: float = 0.0


def consolidating_provisioner() -> dict[str, Any]:
    """:func:`benchmarks.scale_out.provisioner_manifest` with consolidation instead of the emptiness TTL."""
    manifest = provisioner_manifest()
    spec = manifest["spec"]
    spec.pop("ttlSecondsAfterEmpty", None)
    spec.pop("ttlSecondsUntilExpired", None)
    spec["consolidation"] = {"enabled": True}
    return manifest


def budget(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": MAX_UNAVAILABLE,
                     "selector": {"matchLabels": {"app": name, DISCOVERY_LABEL[0]: DISCOVERY_LABEL[1]}}}}


def counters(cluster: LocalCluster, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one counter family from the controller's ``/metrics`` (labels -> value)."""
    port = cluster.ports["controller-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:  # noqa: S310
        text = response.read().decode()
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            if sample.name == f"{family}_total":
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def app_pods(state: ClusterState, app: str) -> list[dict[str, Any]]:
    return [p for p in state.snapshot().pods.values()
            if objects.labels(p).get("app") == app and objects.labels(p).get(DISCOVERY_LABEL[0]) == DISCOVERY_LABEL[1]]


def running(state: ClusterState) -> int:
    return sum(1 for name, _, _ in SHAPES for p in app_pods(state, name)
               if objects.status(p).get("phase") == "Running" and not objects.deleting(p))


def node_signature(state: ClusterState) -> tuple[tuple[str, bool], ...]:
    """The Provisioner's nodes: name, and whether it is going (tainted disrupted or being deleted)."""
    snapshot = state.snapshot()
    return tuple(sorted((v.name, v.marked_for_deletion) for v in state.node_views.nodes(snapshot).values()
                        if v.managed))


class BudgetPoller:
    """Every second: each Deployment's healthy pods against its budget's desired healthy count."""

    def __init__(self, state: ClusterState, replicas: dict[str, int]) -> None:
        self.state = state
        self.desired = {name: count - scaled_value(MAX_UNAVAILABLE, count, round_up=True)
                        for name, count in replicas.items()}
        self.fewest = {name: count for name, count in replicas.items()}
        self.violations = 0
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="budgets", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.polls += 1
            for name, desired in self.desired.items():
                healthy = sum(1 for p in app_pods(self.state, name) if pod_is_healthy(p))
                self.fewest[name] = min(self.fewest[name], healthy)
                if healthy < desired:
                    self.violations += 1
            self._stop.wait(1.0)


def bound_price(state: ClusterState, cloud_provider: str) -> float:
    """The pod-share lower bound (USD/hour) of the Running pods over the Provisioner's instance types."""
    from provisioner.cloudprovider.aws.catalog import instance_types_from_ec2
    from provisioner.cloudprovider.kwok import load_catalog

    catalog = load_catalog()
    types = instance_types_from_ec2(catalog.instance_types, catalog.offerings, catalog.prices)
    requirements = provisioner_requirements(load_provisioner(consolidating_provisioner()))
    allowed = [t for t in types if requirements.intersects(t.requirements) is None]
    pods = [pod_from_manifest(p) for name, _, _ in SHAPES for p in app_pods(state, name)
            if objects.status(p).get("phase") == "Running" and not objects.deleting(p)]
    del cloud_provider  # the kwok catalog is the local cluster's catalog for both providers
    return pod_share_bound(pods, allowed)


def run(args: argparse.Namespace, say: Callable[[str], None]) -> Result:
    """Start the cluster, scale out, scale down, measure consolidation, stop the cluster (unless ``--keep``)."""
    result = Result(args.cloud_provider, args.pods, args.after, args.settle_period, os.getloadavg())
    env = {"GROUPLESS_CONSOLIDATION_SETTLE_PERIOD": f"{args.settle_period:g}s"}
    cluster = LocalCluster(args.name or f"consolidation-{args.cloud_provider}",
                           Settings(cloud_provider=args.cloud_provider, controller_env=env))
    with benchmark_cluster(cluster, args.keep, say):
        try:
            measure(cluster, args, result, say)
        finally:
            result.load_average_end = os.getloadavg()
    return result


def measure(cluster: LocalCluster, args: argparse.Namespace, result: Result, say: Callable[[str], None]) -> None:
    observer = Observer(cluster)
    kube = KubeClient.from_kubeconfig(str(cluster.kubeconfig))
    state = ClusterState(kube, kinds=("Provisioner", "Node", "Pod"))
    state.start()
    if not state.wait_synced(60):
        raise RuntimeError("the benchmark's watch did not sync within 60 s")
    log = LogCursor(cluster.log_path("controller"))
    observer.apply(consolidating_provisioner())
    if not _wait_for_instance_types(log, 180):
        say("the controller did not log its instance types within 180 s; starting anyway")
    items = deployments(args.pods, None)
    say(f"creating {args.pods} pods")
    started = time.monotonic()
    observer.apply({"apiVersion": "v1", "kind": "List", "items": [*items, *(budget(n) for n, _, _ in SHAPES)]})
    deadline = started + args.timeout
    while running(state) < args.pods:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {running(state)}/{args.pods} pods Running after {args.timeout:.0f} s")
        time.sleep(5)
    result.scale_out_seconds = time.monotonic() - started
    say(f"{args.pods} pods Running after {result.scale_out_seconds:.0f} s")
    time.sleep(5)
    result.before = node_figures(state)
    say(f"before: {result.before.nodes} nodes, {result.before.price_per_hour:.4f} USD/hour")
    replicas = {name: args.after // 2 + (args.after % 2 if index == 0 else 0) for index, (name, _, _) in enumerate(SHAPES)}
    evictions = counters(cluster, "groupless_evictions")
    actions = counters(cluster, "groupless_consolidation_actions")
    pid = controller_pid(cluster)
    sampler = Sampler(cluster, pid)
    budgets = BudgetPoller(state, replicas)
    sampler.start()
    budgets.start()
    clock = time.monotonic()
    for name, count in replicas.items():
        observer.scale(name, count)
    say(f"scaled down to {args.after} pods; waiting for the node set to be stable for {STABLE_WINDOW:g} s")
    signature = node_signature(state)
    last_change = time.monotonic()
    deadline = clock + args.timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        now = node_signature(state)
        if now != signature:
            signature, last_change = now, time.monotonic()
            going = sum(1 for _, marked in now if marked)
            say(f"{len(now)} nodes ({going} going), {running(state)} pods Running")
            continue
        if (time.monotonic() - last_change >= STABLE_WINDOW and running(state) == args.after
                and not any(marked for _, marked in now)):
            result.stable_seconds = last_change - clock
            break
    sampler.stop()
    result.controller_p95_rss_mib = percentile(sampler.rss, 0.95) / MIB
    result.controller_max_rss_mib = max(sampler.rss, default=0) / MIB
    result.controller_average_cores = sampler.cores().get("controller process", 0.0)
    result.after = node_figures(state)
    result.bound_price = bound_price(state, args.cloud_provider)
    evicted_key = (("outcome", "evicted"),)
    result.evicted = counters(cluster, "groupless_evictions").get(evicted_key, 0.0) - evictions.get(evicted_key, 0.0)
    settled_actions = counters(cluster, "groupless_consolidation_actions")
    result.actions = {",".join(f"{k}={v}" for k, v in key): value - actions.get(key, 0.0)
                      for key, value in settled_actions.items() if value - actions.get(key, 0.0)}
    say(f"after: {result.after.nodes} nodes, {result.after.price_per_hour:.4f} USD/hour "
        f"(bound {result.bound_price:.4f}); stable after {result.stable_seconds}")
    if args.quiet_minutes > 0 and result.stable_seconds is not None:
        say(f"watching {args.quiet_minutes:g} minutes of the steady workload")
        time.sleep(args.quiet_minutes * 60)
        later = counters(cluster, "groupless_consolidation_actions")
        result.quiet_minutes = args.quiet_minutes
        result.actions_after_settled = sum(
            value - settled_actions.get(key, 0.0) for key, value in later.items() if ("outcome", "started") in key)
    budgets.stop()
    result.fewest_healthy = dict(budgets.fewest)
    result.desired_healthy = dict(budgets.desired)
    result.budget_violations = budgets.violations
    result.polls = budgets.polls
    state.stop(timeout=2)
    kube.close()


def _check(label: str, value: float | None, target: float, below: bool = True) -> str:
    if value is None:
        return f"  {label}: not reached (target {'<=' if below else '>='} {target:g}): MISSED"
    met = value <= target if below else value >= target
    return f"  {label}: {value:.4g} (target {'<=' if below else '>='} {target:g}): {'met' if met else 'MISSED'}"


def summary(result: Result) -> list[str]:
    targets = Targets()
    ratio = result.after.price_per_hour / result.bound_price if result.bound_price else None
    lines = [
        f"consolidation: {result.pods_before} -> {result.pods_after} pods, --cloud-provider {result.cloud_provider}, "
        f"settle period {result.settle_period_seconds:g} s",
        f"scale-out: {result.scale_out_seconds or 0:.0f} s to {result.pods_before} pods Running",
        f"before: {result.before.nodes} nodes, {result.before.price_per_hour:.4f} USD/hour, types {result.before.types}",
        f"after:  {result.after.nodes} nodes, {result.after.price_per_hour:.4f} USD/hour, types {result.after.types}",
        f"pod-share bound of the {result.pods_after} pods: {result.bound_price:.4f} USD/hour; "
        f"price / bound {ratio:.3f}" if ratio else "pod-share bound: -",
        f"stable after: {'-' if result.stable_seconds is None else f'{result.stable_seconds:.0f} s'}",
        f"pods evicted: {result.evicted:.0f}; moves: {result.actions}",
        f"budgets: fewest healthy {result.fewest_healthy} (desired {result.desired_healthy}); "
        f"{result.budget_violations} broken in {result.polls} polls",
        f"controller: RSS P95 {result.controller_p95_rss_mib:.0f} MiB, max {result.controller_max_rss_mib:.0f} MiB; "
        f"{result.controller_average_cores:.3f} cores on average until stable",
        f"moves started in the {result.quiet_minutes:g} min after it settled: "
        f"{'-' if result.actions_after_settled is None else f'{result.actions_after_settled:.0f}'}",
        "targets:",
        _check("stable (s)", result.stable_seconds, targets.stable_seconds),
        _check("price / bound", ratio, targets.price_over_bound),
        _check("budgets broken", float(result.budget_violations), targets.budget_violations),
        _check("moves after settled", result.actions_after_settled, targets.actions_after),
        f"load average: start {' '.join(f'{v:.2f}' for v in result.load_average_start)}, "
        f"end {' '.join(f'{v:.2f}' for v in result.load_average_end)}",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.consolidation",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cloud-provider", choices=("kwok", "aws"), default="kwok")
    parser.add_argument("--pods", type=int, default=1000, help="pods before the scale-down (default 1000)")
    parser.add_argument("--after", type=int, default=700, help="pods after the scale-down (default 700)")
    parser.add_argument("--settle-period", type=float, default=30.0,
                        help="the controller's --consolidation-settle-period, seconds (default 30)")
    parser.add_argument("--quiet-minutes", type=float, default=10.0,
                        help="minutes of the steady workload watched for moves after it settled (default 10)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds for each phase (default 1200)")
    parser.add_argument("--name", default=None, help="the local cluster's name (default consolidation-<provider>)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    args = parser.parse_args(argv)
    if not 2 <= args.after < args.pods:
        parser.error(f"--after must be at least 2 and below --pods, got {args.after}")
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    from localcluster.cli import terminate_like_interrupt

    terminate_like_interrupt()
    result = run(args, say)
    print("\n".join(summary(result)))
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2, default=str))
    return 0 if result.stable_seconds is not None else 1


if __name__ == "__main__":
    sys.exit(main())
