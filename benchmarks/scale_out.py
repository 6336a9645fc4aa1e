"""Karpenter's KWOK performance test "basic" (scale-out) on Groupless's local cluster.

    .venv/bin/python -m benchmarks.scale_out [--cloud-provider kwok|aws] [--pods N]
        [--hostname-spread all|small] [--profile] [--json FILE] [--keep]

The workload is ``test/suites/performance/basic_test.go`` of kubernetes-sigs/karpenter: two
Deployments, half the pods 900m / 3100Mi (``small-resource-app``) and half 3500m / 28Gi
(``large-resource-app``), labelled ``testing/cluster: unspecified`` as the suite's pods are.
The Provisioner is the walkthrough's (spot and on-demand, arm64 and amd64) with the suite's
changes: no limits, and instance types of fewer than 33 vCPUs (the suite's ``instance-size < 32``
on its kwok catalog; here ``karpenter.k8s.aws/instance-cpu Lt 33``). ``--hostname-spread``
is the suite's ``host_name_spreading_test.go``: a ``kubernetes.io/hostname`` topology spread
(maxSkew 1, DoNotSchedule) on every pod (``all``) or, as the suite has it, on the small
Deployment only (``small``).

The benchmark starts a local cluster of its own (``--name``, default ``scale-out-<provider>``),
applies the Provisioner, waits until the controller has fetched its instance types (a running
controller has them), then creates both Deployments and starts the clock. It prints, once
every pod is Running (or at ``--timeout``):

* time to all Running (and to the first node, 50 % and 90 % Running);
* the nodes launched, by instance type and capacity type, and their price (the
  ``groupless.dev/price-per-hour`` annotation each Node carries);
* reserved CPU and memory utilisation of the new nodes: per node, the requests of its bound
  pods over its allocatable, averaged over the nodes (Karpenter's ``Monitor.AvgUtilization``);
* the controller's RSS (P95, maximum; sampled from ``/proc`` every second) and average CPU
  (``/proc/<pid>/stat`` user + system time over the wall time), and the CPU of every other
  process of the cluster over the same interval (which component holds the machine);
* the batches: each ``Batched N pods in D`` line of the controller's log;
* the extender's latency as kube-scheduler saw it: kube-scheduler's own
  ``scheduler_scheduling_algorithm_duration_seconds`` (it contains the extender's filter and
  prioritize calls) minus its in-tree extension points (PreFilter, Filter, PostFilter,
  PreScore, Score), per scheduling attempt; and the extender's own
  ``groupless_extender_request_duration_seconds``;
* with ``--profile``, the controller's hottest functions (py-spy, when installed: ``pip install
  py-spy``), sampled over the scale-out.

The summary ends with each target of the mode (time, utilisation, RSS, CPU) and whether it
was met, and the load average at the start and the end (the machine is shared: compare runs
taken under similar load). ``--json`` also writes the figures to a file. The cluster is
stopped at the end (``--keep`` leaves it running for inspection), also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from localcluster.cluster import LocalCluster, Settings
from localcluster.supervisor import SupervisedComponent, read_state
from localcluster.walkthrough import LogCursor, Observer, load_manifest, walkthrough_source
from provisioner.cloudprovider.aws.catalog import LABEL_INSTANCE_CPU
from provisioner.kube.api import WatchEvent
from provisioner.kube.client import KubeClient
from provisioner.model import labels as wk
from provisioner.model.resources import CPU, MEMORY
from provisioner.state.cluster import ClusterState

#: The suite's discovery label: every pod of the test carries it.
DISCOVERY_LABEL = ("testing/cluster", "unspecified")
#: The two shapes of "basic": (Deployment name, cpu, memory).
SHAPES = (("small-resource-app", "900m", "3100Mi"), ("large-resource-app", "3500m", "28Gi"))
PROVISIONER_NAME = "default"
#: kube-scheduler's in-tree extension points; the rest of a scheduling algorithm's time is the extender's.
IN_TREE_EXTENSION_POINTS = ("PreFilter", "Filter", "PostFilter", "PreScore", "Score")
BATCHED = re.compile(r"Batched (\d+) pods in ([0-9.]+)s")
ROUND = re.compile(r"Round of (\d+) pods?: .*")
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Targets:
    """The figures a mode must meet (seconds, fractions, MiB, cores); None: no target."""

    running_seconds: float | None
    cpu_utilisation: float | None = 0.85
    memory_utilisation: float | None = 0.80
    p95_rss_mib: float | None = 150.0
    average_cpu_cores: float | None = 0.25


def targets_for(cloud_provider: str, pods: int, hostname_spread: str | None) -> Targets:
    """The targets of this benchmark's modes; other runs are measured against none."""
    if hostname_spread is None and pods == 1000:
        return Targets(running_seconds=60.0 if cloud_provider == "kwok" else 120.0)
    if hostname_spread is None and pods == 5000 and cloud_provider == "kwok":
        return Targets(running_seconds=300.0, cpu_utilisation=None, memory_utilisation=None, p95_rss_mib=400.0,
                       average_cpu_cores=None)
    return Targets(None, None, None, None, None)


# ---------------------------------------------------------------------------- the workload
def provisioner_manifest() -> dict[str, Any]:
    """The walkthrough's Provisioner with the suite's changes: no limits, fewer than 33 vCPUs."""
    manifest = load_manifest("01-provisioner.yaml", walkthrough_source(prefer_shared=True))
    manifest["metadata"] = {"name": PROVISIONER_NAME}
    spec = manifest["spec"]
    spec.pop("limits", None)
    spec["requirements"] = [*spec.get("requirements", []),
                            {"key": LABEL_INSTANCE_CPU, "operator": "Lt", "values": ["33"]}]
    return manifest


def deployment(name: str, replicas: int, cpu: str, memory: str, hostname_spread: bool) -> dict[str, Any]:
    """One of the suite's Deployments (``test.Deployment(test.CreateDeploymentOptions(...))``)."""
    labels = {"app": name, DISCOVERY_LABEL[0]: DISCOVERY_LABEL[1]}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if hostname_spread:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": wk.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels},
        }]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def deployments(pods: int, hostname_spread: str | None) -> list[dict[str, Any]]:
    """The two Deployments, ``pods`` in all (half each; the small one gets an odd pod)."""
    result = []
    for index, (name, cpu, memory) in enumerate(SHAPES):
        replicas = pods // 2 + (pods % 2 if index == 0 else 0)
        spread = hostname_spread == "all" or (hostname_spread == "small" and index == 0)
        result.append(deployment(name, replicas, cpu, memory, spread))
    return result


# ---------------------------------------------------------------------------- /proc
def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICKS


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process in bytes (``/proc/<pid>/statm``)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None


def processes_by_group() -> dict[int, list[int]]:
    """Process group id -> pids, for every process of the machine."""
    groups: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            groups[int(fields[2])].append(int(entry.name))
    return groups


def component_pids(cluster: LocalCluster) -> dict[str, list[int]]:
    """Each component of the cluster -> the pids of its process group (gunicorn workers, supervisors included)."""
    state = read_state(cluster.state_file) or {}
    groups = processes_by_group()
    return {name: groups.get(int(entry["pgid"]), []) for name, entry in (state.get("components") or {}).items()}


def controller_pid(cluster: LocalCluster) -> int:
    """The pid of the ``groupless controller`` process (the supervisor's child)."""
    state = read_state(cluster.state_file) or {}
    entry = (state.get("components") or {}).get("controller")
    supervised = SupervisedComponent.from_entry(entry) if entry else None
    if supervised is None or supervised.child_pid is None:
        raise RuntimeError(f"no controller process in {cluster.state_file}")
    return supervised.child_pid


class Sampler:
    """Samples the controller's RSS every ``interval`` seconds on a thread; CPU of every component at start and stop."""

    def __init__(self, cluster: LocalCluster, pid: int, interval: float = 1.0) -> None:
        self.cluster = cluster
        self.pid = pid
        self.interval = interval
        self.rss: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self.cpu_start: dict[str, float] = {}
        self.cpu_end: dict[str, float] = {}
        self.started = 0.0
        self.wall = 0.0

    def _cpu(self) -> dict[str, float]:
        totals = {}
        for name, pids in component_pids(self.cluster).items():
            totals[name] = sum(seconds for pid in pids if (seconds := cpu_seconds(pid)) is not None)
        totals["controller process"] = cpu_seconds(self.pid) or 0.0
        totals["benchmark (this process)"] = time.process_time()
        return totals

    def start(self) -> None:
        self.cpu_start = self._cpu()
        self.started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.wall = time.monotonic() - self.started
        self.cpu_end = self._cpu()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = rss_bytes(self.pid)
            if rss is not None:
                self.rss.append(rss)
            self._stop.wait(self.interval)

    def cores(self) -> dict[str, float]:
        """Average cores of each component over the interval (CPU seconds / wall seconds)."""
        wall = self.wall or 1.0
        return {name: (self.cpu_end.get(name, 0.0) - start) / wall for name, start in self.cpu_start.items()}


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(fraction * len(ordered)) - 1)])


# ---------------------------------------------------------------------------- pods and nodes
class PodWatch:
    """Follows the benchmark's pods and the cluster's Nodes through the cluster state cache.

    Records, relative to :meth:`start_clock`, when each count of Running pods was first reached
    and when the first Node of the Provisioner appeared.
    """

    def __init__(self, kube: KubeClient, total: int) -> None:
        self.state = ClusterState(kube, kinds=("Provisioner", "Node", "Pod"))
        self.total = total
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self.reached: dict[int, float] = {}
        self.first_node: float | None = None
        self.clock_started: float | None = None
        self.done = threading.Event()
        self.state.subscribe(self._on_change)

    def start(self) -> None:
        self.state.start()
        if not self.state.wait_synced(60):
            raise RuntimeError("the benchmark's watch of pods and nodes did not sync within 60 s")

    def start_clock(self) -> None:
        with self._lock:
            self.clock_started = time.monotonic()

    def _on_change(self, kind: str, event: WatchEvent) -> None:
        obj = event.object
        meta = obj.get("metadata") or {}
        with self._lock:
            if self.clock_started is None:
                return
            elapsed = time.monotonic() - self.clock_started
            if kind == "Node":
                if self.first_node is None and (meta.get("labels") or {}).get(wk.PROVISIONER_NAME):
                    self.first_node = elapsed
                return
            if kind != "Pod" or (meta.get("labels") or {}).get(DISCOVERY_LABEL[0]) != DISCOVERY_LABEL[1]:
                return
            uid = str(meta.get("uid"))
            running = (event.type != "DELETED" and (obj.get("status") or {}).get("phase") == "Running"
                       and not meta.get("deletionTimestamp"))
            if running:
                self._running.add(uid)
            else:
                self._running.discard(uid)
            count = len(self._running)
            self.reached.setdefault(count, elapsed)
            if count >= self.total:
                self.done.set()

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def time_to(self, fraction: float) -> float | None:
        """Seconds until ``fraction`` of the pods were first Running together (None: never)."""
        wanted = math.ceil(fraction * self.total)
        with self._lock:
            times = [t for count, t in self.reached.items() if count >= wanted]
        return min(times) if times else None

    def stop(self) -> None:
        self.state.stop(timeout=2)


@dataclass
class NodeFigures:
    """The Provisioner's nodes once the pods run: how many, what, the price, how full."""

    nodes: int = 0
    price_per_hour: float = 0.0
    unpriced: int = 0
    cpu_utilisation: float = 0.0
    memory_utilisation: float = 0.0
    types: dict[str, int] = field(default_factory=dict)
    capacity_types: dict[str, int] = field(default_factory=dict)


def node_figures(state: ClusterState) -> NodeFigures:
    """:class:`NodeFigures` of the managed nodes (Karpenter's ``Monitor``: nodes with zero allocatable are skipped)."""
    snapshot = state.snapshot()
    figures = NodeFigures()
    cpu: list[float] = []
    memory: list[float] = []
    for view in state.node_views.nodes(snapshot).values():
        if not view.managed:
            continue
        figures.nodes += 1
        figures.types[view.instance_type] = figures.types.get(view.instance_type, 0) + 1
        figures.capacity_types[view.capacity_type] = figures.capacity_types.get(view.capacity_type, 0) + 1
        if view.price is None:
            figures.unpriced += 1
        else:
            figures.price_per_hour += view.price
        for name, values in ((CPU, cpu), (MEMORY, memory)):
            if view.allocatable.get(name) > 0:
                values.append(view.requested.get(name) / view.allocatable.get(name))
    figures.cpu_utilisation = statistics.fmean(cpu) if cpu else 0.0
    figures.memory_utilisation = statistics.fmean(memory) if memory else 0.0
    return figures


def stragglers(state: ClusterState, now: float, limit: int = 12) -> tuple[int, list[str]]:
    """The benchmark's pods not Running at the end, and for up to ``limit`` of them why.

    Returns (how many, one line per pod shown): the pod, where it is bound, its
    ``PodScheduled`` condition's reason and message (kube-scheduler's last word), and the node
    whose ``groupless.dev/nominations`` names it, with that node's state (Ready, starting,
    cordoned, marked for deletion), whether the nomination still holds at ``now`` (epoch
    seconds) and the node's free room beside its bound pods. A pod no node nominates says so.
    """
    snapshot = state.snapshot()
    views = state.node_views.nodes(snapshot)
    nominated_to = {uid: view for view in views.values() for uid in view.nominations.pods}
    waiting = [pod for pod in snapshot.pods.values()
               if (pod.get("metadata") or {}).get("labels", {}).get(DISCOVERY_LABEL[0]) == DISCOVERY_LABEL[1]
               and (pod.get("status") or {}).get("phase") != "Running"]
    waiting.sort(key=lambda pod: str((pod.get("metadata") or {}).get("name")))
    lines = []
    for pod in waiting[:limit]:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        uid = str(meta.get("uid"))
        condition: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        line = (f"{meta.get('name')}: node {spec.get('nodeName') or '-'}, PodScheduled "
                f"{condition.get('status', '?')} {condition.get('reason', '')} {condition.get('message', '')!r}")
        view = nominated_to.get(uid)
        if view is None:
            line += "; nominated nowhere"
        else:
            held = uid in view.held(snapshot.pods, now).pods
            free = view.allocatable - view.requested
            line += (f"; nominated to {view.name} (ready {view.ready}, starting {view.starting}, "
                     f"cordoned {view.cordoned}, marked for deletion {view.marked_for_deletion}, "
                     f"holds {held}, deadline in {view.nominations.deadline - now:.0f} s, "
                     f"{len(view.nominations.pods)} nominated, {len(view.pods)} bound, "
                     f"free cpu {free.get(CPU)}m memory {free.get(MEMORY) // MIB} MiB)")
        lines.append(line)
    return len(waiting), lines


# ---------------------------------------------------------------------------- metrics
Histogram = dict[str, Any]  # {"buckets": [(le, cumulative count)], "sum": float, "count": float}


def scrape(url: str, context: ssl.SSLContext | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], Histogram]:
    """Every histogram and counter of a Prometheus endpoint: (name, labels without ``le``) -> buckets, sum, count."""
    with urllib.request.urlopen(url, timeout=30, context=context) as response:  # noqa: S310 - loopback
        text = response.read().decode()
    result: dict[tuple[str, tuple[tuple[str, str], ...]], Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "counter":  # a counter as a histogram without buckets: its value is the count
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = tuple(sorted(sample.labels.items()))
                    result[(sample.name, labels)] = {"buckets": [], "sum": 0.0, "count": sample.value}
            continue
        if family.type != "histogram":
            continue
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            entry = result.setdefault((family.name, labels), {"buckets": [], "sum": 0.0, "count": 0.0})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                entry["sum"] = sample.value
            elif sample.name.endswith("_count"):
                entry["count"] = sample.value
    return result


def difference(after: Histogram, before: Histogram | None) -> Histogram:
    """``after - before`` bucket by bucket (what was observed between two scrapes)."""
    if before is None:
        return after
    earlier = dict(before["buckets"])
    return {"buckets": [(le, count - earlier.get(le, 0.0)) for le, count in after["buckets"]],
            "sum": after["sum"] - before["sum"], "count": after["count"] - before["count"]}


def quantile(histogram: Histogram, q: float) -> float:
    """The ``q`` quantile of a histogram by linear interpolation in its bucket (Prometheus' histogram_quantile)."""
    buckets = sorted(histogram["buckets"])
    total = histogram["count"]
    if not buckets or total <= 0:
        return 0.0
    rank = q * total
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower
            width = count - below
            return float(lower + (le - lower) * ((rank - below) / width if width > 0 else 0.0))
        lower, below = le, count
    return lower


def merged_histograms(histograms: Iterable[Histogram]) -> Histogram:
    """The sum of histograms with the same buckets (several label sets of one metric)."""
    buckets: dict[float, float] = {}
    total_sum, total_count = 0.0, 0.0
    for histogram in histograms:
        for le, count in histogram["buckets"]:
            buckets[le] = buckets.get(le, 0.0) + count
        total_sum += histogram["sum"]
        total_count += histogram["count"]
    return {"buckets": sorted(buckets.items()), "sum": total_sum, "count": total_count}


@dataclass
class SchedulerFigures:
    """kube-scheduler's view of one run: scheduling attempts, their algorithm time, the extender's share."""

    attempts: float = 0.0
    algorithm_p50: float = 0.0
    algorithm_p95: float = 0.0
    algorithm_p99: float = 0.0
    algorithm_mean: float = 0.0
    in_tree_mean: float = 0.0
    extender_mean: float = 0.0
    extender_server: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ``scheduler_schedule_attempts_total`` by result (scheduled, unschedulable, error).
    attempts_by_result: dict[str, float] = field(default_factory=dict)
    #: ``scheduler_queue_incoming_pods_total`` into the active and backoff queues, by event: what moved pods to a retry.
    retried_by_event: dict[str, float] = field(default_factory=dict)
    #: kube-scheduler's own API requests (``rest_client_request_duration_seconds``) by verb: count and mean seconds.
    #: Without the SchedulerAsyncAPICalls feature, the status patch of an unschedulable attempt holds its loop.
    api_requests: dict[str, dict[str, float]] = field(default_factory=dict)
    #: kube-apiserver's ``apiserver_request_total`` of writes, by verb and resource (every client): what loads it.
    apiserver_writes: dict[str, float] = field(default_factory=dict)


def apiserver_writes(after: dict[Any, Histogram], before: dict[Any, Histogram]) -> dict[str, float]:
    """kube-apiserver's write requests between two scrapes, by ``"VERB resource[/subresource]"`` (and the code unless 2xx)."""
    writes: dict[str, float] = {}
    for key, counter in after.items():
        labels = dict(key[1])
        if key[0] != "apiserver_request_total" or labels.get("verb") in ("GET", "LIST", "WATCH"):
            continue
        observed = difference(counter, before.get(key))["count"]
        if observed > 0:
            code = str(labels.get("code", ""))
            what = f"{labels.get('verb')} {labels.get('resource')}" + (
                f"/{labels['subresource']}" if labels.get("subresource") else "") + (
                f" ({code})" if code and not code.startswith("2") else "")
            writes[what] = writes.get(what, 0.0) + observed
    return writes


class MetricsReader:
    """Scrapes kube-scheduler's and the extender's /metrics before and after the scale-out."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.insecure = ssl.create_default_context()
        self.insecure.check_hostname = False
        self.insecure.verify_mode = ssl.CERT_NONE
        self.trusted = ssl.create_default_context(cafile=str(cluster.pki.ca.cert))
        self.admin = ssl.create_default_context(cafile=str(cluster.pki.ca.cert))
        self.admin.load_cert_chain(str(cluster.pki.admin.cert), str(cluster.pki.admin.key))
        self.before: dict[str, dict[Any, Histogram]] = {}

    def _scrape_all(self) -> dict[str, dict[Any, Histogram]]:
        result: dict[str, dict[Any, Histogram]] = {}
        scheduler = self.cluster.ports.get("scheduler")
        extender = self.cluster.ports.get("extender")
        with contextlib.suppress(OSError):
            result["scheduler"] = scrape(f"https://127.0.0.1:{scheduler}/metrics", self.insecure)
        if extender:
            with contextlib.suppress(OSError):
                result["extender"] = scrape(f"https://127.0.0.1:{extender}/metrics", self.trusted)
        with contextlib.suppress(OSError):
            result["apiserver"] = scrape(f"{self.cluster.apiserver_url}/metrics", self.admin)
        return result

    def start(self) -> None:
        self.before = self._scrape_all()

    def figures(self) -> SchedulerFigures:
        after = self._scrape_all()
        figures = SchedulerFigures()
        scheduler, before = after.get("scheduler", {}), self.before.get("scheduler", {})

        def delta(name: str, match: Callable[[dict[str, str]], bool] = lambda labels: True) -> Histogram:
            return merged_histograms(difference(h, before.get(key)) for key, h in scheduler.items()
                                     if key[0] == name and match(dict(key[1])))

        algorithm = delta("scheduler_scheduling_algorithm_duration_seconds")
        figures.attempts = algorithm["count"]
        if algorithm["count"] > 0:
            figures.algorithm_p50 = quantile(algorithm, 0.50)
            figures.algorithm_p95 = quantile(algorithm, 0.95)
            figures.algorithm_p99 = quantile(algorithm, 0.99)
            figures.algorithm_mean = algorithm["sum"] / algorithm["count"]
            in_tree = delta("scheduler_framework_extension_point_duration_seconds",
                            lambda labels: labels.get("extension_point") in IN_TREE_EXTENSION_POINTS)
            figures.in_tree_mean = in_tree["sum"] / algorithm["count"]
            figures.extender_mean = max(0.0, figures.algorithm_mean - figures.in_tree_mean)
        for key, counter in scheduler.items():
            labels = dict(key[1])
            observed = difference(counter, before.get(key))["count"]
            if observed <= 0:
                continue
            if key[0] == "scheduler_schedule_attempts_total":
                result = labels.get("result", "?")
                figures.attempts_by_result[result] = figures.attempts_by_result.get(result, 0.0) + observed
            elif key[0] == "scheduler_queue_incoming_pods_total" and labels.get("queue") in ("active", "backoff"):
                event = labels.get("event", "?")
                figures.retried_by_event[event] = figures.retried_by_event.get(event, 0.0) + observed
        def of_verb(verb: str) -> Callable[[dict[str, str]], bool]:
            return lambda labels: labels.get("verb") == verb

        for verb in ("PATCH", "POST", "PUT", "GET"):
            requests = delta("rest_client_request_duration_seconds", of_verb(verb))
            if requests["count"] > 0:
                figures.api_requests[verb] = {"count": requests["count"], "mean": requests["sum"] / requests["count"]}
        figures.apiserver_writes = apiserver_writes(after.get("apiserver", {}), self.before.get("apiserver", {}))
        extender, extender_before = after.get("extender", {}), self.before.get("extender", {})
        for key, histogram in extender.items():
            if key[0] != "groupless_extender_request_duration_seconds":
                continue
            labels = dict(key[1])
            observed = difference(histogram, extender_before.get(key))
            if observed["count"] <= 0:
                continue
            verb = labels.get("verb") or labels.get("handler") or "?"
            entry = figures.extender_server.setdefault(verb, {"count": 0.0, "sum": 0.0})
            entry["count"] += observed["count"]
            entry["sum"] += observed["sum"]
        return figures


# ---------------------------------------------------------------------------- profile
class Profiler:
    """py-spy sampling the controller over the scale-out (``--profile``), when py-spy is installed."""

    def __init__(self, pid: int, directory: Path) -> None:
        self.pid = pid
        self.output = directory / "controller.pyspy.txt"
        self.process: subprocess.Popen[bytes] | None = None
        self.executable = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

    def start(self) -> bool:
        if not Path(self.executable).exists():
            print("--profile: py-spy is not installed (pip install py-spy); no profile taken", file=sys.stderr)
            return False
        self.process = subprocess.Popen(  # noqa: S603 - our own py-spy, our own controller
            [self.executable, "record", "--pid", str(self.pid), "--format", "raw", "--rate", "50",
             "--nonblocking", "--output", str(self.output)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        return True

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def top(self, count: int = 25) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
        """Total samples, the ``count`` functions with most samples on top of the stack and anywhere in it."""
        own: collections.Counter[str] = collections.Counter()
        total: collections.Counter[str] = collections.Counter()
        samples = 0
        try:
            lines = self.output.read_text().splitlines()
        except OSError:
            return 0, [], []
        for line in lines:
            stack, _, number = line.rpartition(" ")
            if not stack or not number.isdigit():
                continue
            n = int(number)
            samples += n
            frames = [frame for frame in stack.split(";") if frame]
            if frames:
                own[frames[-1]] += n
            for frame in set(frames):
                total[frame] += n
        return samples, own.most_common(count), total.most_common(count)


# ---------------------------------------------------------------------------- the run
@dataclass
class Result:
    """Every figure of one run (``--json`` writes this)."""

    cloud_provider: str
    pods: int
    hostname_spread: str | None
    load_average_start: tuple[float, float, float]
    load_average_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    running_seconds: float | None = None
    running_pods: int = 0
    first_node_seconds: float | None = None
    half_running_seconds: float | None = None
    ninety_running_seconds: float | None = None
    nodes: NodeFigures = field(default_factory=NodeFigures)
    controller_idle_rss_mib: float = 0.0
    controller_p95_rss_mib: float = 0.0
    controller_max_rss_mib: float = 0.0
    controller_average_cores: float = 0.0
    component_cores: dict[str, float] = field(default_factory=dict)
    batches: list[tuple[int, float]] = field(default_factory=list)
    rounds: list[str] = field(default_factory=list)
    scheduler: SchedulerFigures = field(default_factory=SchedulerFigures)
    scheduler_settings: dict[str, Any] = field(default_factory=dict)
    profile_samples: int = 0
    profile_own: list[tuple[str, int]] = field(default_factory=list)
    profile_total: list[tuple[str, int]] = field(default_factory=list)
    controller_env: dict[str, str] = field(default_factory=dict)
    not_running: int = 0
    stragglers: list[str] = field(default_factory=list)


def controller_variable(text: str) -> tuple[str, str]:
    """``GROUPLESS_NAME=VALUE`` -> (name, value); raises ValueError naming the text otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not name.startswith("GROUPLESS_"):
        raise ValueError(f"expected GROUPLESS_NAME=VALUE, got {text!r}")
    return name, value


def parse_gates(text: str) -> dict[str, bool]:
    """``"A=true,B=false"`` as kube-scheduler's ``--feature-gates`` reads it ("" is none); ValueError names a bad item."""
    gates = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if not name or value.lower() not in ("true", "false"):
            raise ValueError(f"--scheduler-feature-gates: expected NAME=true|false, got {item!r}")
        gates[name] = value.lower() == "true"
    return gates


def _wait_for_instance_types(log: LogCursor, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(f"instance types for Provisioner {PROVISIONER_NAME}" in line for line in log.read()):
            return True
        time.sleep(0.5)
    return False


@contextlib.contextmanager
def benchmark_cluster(cluster: LocalCluster, keep: bool, say: Callable[[str], None]) -> Iterator[LocalCluster]:
    """``cluster`` started for a benchmark, stopped when the block ends unless ``keep``.

    Raises RuntimeError when a cluster of that name runs already (its figures would not be the
    benchmark's). With ``keep`` the components outlive this process and the way to stop them is said.
    """
    if cluster.running():
        raise RuntimeError(f"a local cluster named {cluster.name!r} is running already; stop it or pass --name")
    cluster.up(progress=say, detach=keep)
    try:
        yield cluster
    finally:
        if keep:
            say(f"--keep: the cluster stays up; stop it with `groupless dev-cluster down --name {cluster.name}`")
        else:
            cluster.down(quiet=True)
            say("cluster stopped")


def run(args: argparse.Namespace, say: Callable[[str], None]) -> Result:
    """Start the cluster, run the scale-out, collect the figures, stop the cluster (unless ``--keep``)."""
    result = Result(args.cloud_provider, args.pods, args.hostname_spread, os.getloadavg())
    settings = Settings(cloud_provider=args.cloud_provider)
    if args.scheduler_feature_gates is not None:
        settings = replace(settings, scheduler_feature_gates=parse_gates(args.scheduler_feature_gates))
    if args.percentage_of_nodes_to_score is not None:
        settings = replace(settings, percentage_of_nodes_to_score=args.percentage_of_nodes_to_score)
    if args.controller_env:
        settings = replace(settings, controller_env=dict(args.controller_env))
    result.scheduler_settings = {"feature_gates": dict(settings.scheduler_feature_gates),
                                 "percentage_of_nodes_to_score": settings.percentage_of_nodes_to_score}
    result.controller_env = dict(settings.controller_env)
    cluster = LocalCluster(args.name or f"scale-out-{args.cloud_provider}", settings)
    with benchmark_cluster(cluster, args.keep, say):
        try:
            measure(cluster, args, result, say)
        finally:
            result.load_average_end = os.getloadavg()
    return result


def measure(cluster: LocalCluster, args: argparse.Namespace, result: Result, say: Callable[[str], None]) -> None:
    observer = Observer(cluster)
    kube = KubeClient.from_kubeconfig(str(cluster.kubeconfig))
    watch = PodWatch(kube, args.pods)
    watch.start()
    log = LogCursor(cluster.log_path("controller"))
    observer.apply(provisioner_manifest())
    if not _wait_for_instance_types(log, 180):
        say("the controller did not log its instance types within 180 s; starting anyway")
    pid = controller_pid(cluster)
    time.sleep(2)  # let the controller settle after the warm-up
    result.controller_idle_rss_mib = (rss_bytes(pid) or 0) / MIB
    metrics = MetricsReader(cluster)
    metrics.start()
    sampler = Sampler(cluster, pid)
    profiler = Profiler(pid, Path(tempfile.mkdtemp(prefix="scale-out-profile-")))
    log.skip()
    say(f"creating {args.pods} pods ({', '.join(name for name, _, _ in SHAPES)}); controller pid {pid}")
    sampler.start()
    if args.profile:
        profiler.start()
    watch.start_clock()
    observer.apply({"apiVersion": "v1", "kind": "List", "items": deployments(args.pods, args.hostname_spread)})
    deadline = time.monotonic() + args.timeout
    while not watch.done.wait(10):
        say(f"{watch.running()}/{args.pods} Running")
        if time.monotonic() > deadline:
            say(f"timed out after {args.timeout:.0f} s")
            break
    sampler.stop()
    if args.profile:
        profiler.stop()
        result.profile_samples, result.profile_own, result.profile_total = profiler.top()
    result.running_pods = watch.running()
    result.running_seconds = watch.time_to(1.0)
    result.first_node_seconds = watch.first_node
    result.half_running_seconds = watch.time_to(0.5)
    result.ninety_running_seconds = watch.time_to(0.9)
    result.nodes = node_figures(watch.state)
    result.not_running, result.stragglers = stragglers(watch.state, time.time())
    result.controller_p95_rss_mib = percentile(sampler.rss, 0.95) / MIB
    result.controller_max_rss_mib = max(sampler.rss, default=0) / MIB
    cores = sampler.cores()
    result.controller_average_cores = cores.pop("controller process", 0.0)
    result.component_cores = dict(sorted(cores.items(), key=lambda item: -item[1]))
    for line in log.read():
        if match := BATCHED.search(line):
            result.batches.append((int(match.group(1)), float(match.group(2))))
        elif match := ROUND.search(line):
            result.rounds.append(match.group(0))
    result.scheduler = metrics.figures()
    watch.stop()
    kube.close()


# ---------------------------------------------------------------------------- the summary
def _percentage(value: int | None) -> str:
    """How kube-scheduler's percentageOfNodesToScore was set for the run."""
    if value is None:
        return "deploy/scheduler's (100)"
    return "0 (adaptive)" if value == 0 else str(value)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _check(label: str, value: float | None, target: float | None, below: bool, unit: str = "") -> str:
    if target is None:
        return ""
    if value is None:
        return f"  {label}: target {'<' if below else '>'} {target:g}{unit}: MISSED (not reached)"
    met = value < target if below else value > target
    return f"  {label}: {value:.3g}{unit} (target {'<' if below else '>'} {target:g}{unit}): {'met' if met else 'MISSED'}"


def summary(result: Result) -> list[str]:
    """The printed summary (one figure a line)."""
    mode = f"{result.pods} pods, --cloud-provider {result.cloud_provider}"
    if result.hostname_spread:
        mode += f", hostname spread on {result.hostname_spread}"
    n = result.nodes
    lines = [
        f"== scale-out ({mode}) ==",
        f"load average at start {' '.join(f'{x:.2f}' for x in result.load_average_start)}, "
        f"at end {' '.join(f'{x:.2f}' for x in result.load_average_end)} (2 cores, shared machine)",
        f"kube-scheduler:     feature gates {result.scheduler_settings.get('feature_gates') or 'default'}, "
        f"percentageOfNodesToScore {_percentage(result.scheduler_settings.get('percentage_of_nodes_to_score'))}",
        "controller:         " + (", ".join(f"{k}={v}" for k, v in sorted(result.controller_env.items()))
                                  or "the local cluster's settings"),
        f"all Running:        {_seconds(result.running_seconds)} ({result.running_pods}/{result.pods} Running at the end)",
        f"first node:         {_seconds(result.first_node_seconds)}; 50 % Running {_seconds(result.half_running_seconds)}; "
        f"90 % Running {_seconds(result.ninety_running_seconds)}",
        f"nodes:              {n.nodes} ({', '.join(f'{c} {t}' for t, c in sorted(n.capacity_types.items()))})",
        f"price:              ${n.price_per_hour:.2f} per hour"
        + (f" ({n.unpriced} nodes without a price)" if n.unpriced else ""),
        f"instance types:     {', '.join(f'{c}x {t}' for t, c in sorted(n.types.items(), key=lambda i: -i[1]))}",
        f"utilisation:        cpu {n.cpu_utilisation:.1%}, memory {n.memory_utilisation:.1%} (reserved, mean over nodes)",
        f"controller RSS:     idle {result.controller_idle_rss_mib:.0f} MiB, P95 {result.controller_p95_rss_mib:.0f} MiB, "
        f"max {result.controller_max_rss_mib:.0f} MiB",
        f"controller CPU:     {result.controller_average_cores:.3f} cores on average",
        "CPU by process:     " + ", ".join(f"{name} {cores:.2f}" for name, cores in result.component_cores.items()),
    ]
    sizes = [size for size, _ in result.batches]
    durations = [duration for _, duration in result.batches]
    lines.append(f"batches:            {len(sizes)}: " + ", ".join(f"{s} pods/{d:.1f}s" for s, d in result.batches[:40])
                 + (" ..." if len(sizes) > 40 else ""))
    if durations:
        lines.append(f"batch durations:    max {max(durations):.1f} s, mean {statistics.fmean(durations):.1f} s")
    for line in result.rounds[:20]:
        lines.append(f"round:              {line}")
    s = result.scheduler
    lines.append(f"kube-scheduler:     {s.attempts:.0f} scheduling attempts; algorithm "
                 f"p50 {s.algorithm_p50 * 1000:.1f} ms, p95 {s.algorithm_p95 * 1000:.1f} ms, "
                 f"p99 {s.algorithm_p99 * 1000:.1f} ms, mean {s.algorithm_mean * 1000:.1f} ms")
    lines.append("scheduling results: " + ", ".join(f"{r} {n:.0f}" for r, n in sorted(s.attempts_by_result.items())))
    lines.append("scheduler API:      " + ", ".join(
        f"{verb} {entry['count']:.0f} x {entry['mean'] * 1000:.0f} ms" for verb, entry in s.api_requests.items()))
    lines.append("API server writes:  " + ", ".join(
        f"{what} {n:.0f}" for what, n in sorted(s.apiserver_writes.items(), key=lambda item: -item[1])[:14]))
    lines.append("pods (re)queued by: " + ", ".join(
        f"{e} {n:.0f}" for e, n in sorted(s.retried_by_event.items(), key=lambda item: -item[1])[:12]))
    lines.append(f"extender latency:   {s.extender_mean * 1000:.1f} ms per attempt as kube-scheduler saw it "
                 f"(algorithm mean minus in-tree extension points {s.in_tree_mean * 1000:.1f} ms)")
    for verb, entry in sorted(s.extender_server.items()):
        lines.append(f"extender /{verb}:   {entry['count']:.0f} requests, mean {entry['sum'] / entry['count'] * 1000:.1f} ms "
                     "(server side)")
    if result.stragglers:
        lines.append(f"not Running:        {result.not_running} pods; the first {len(result.stragglers)}:")
        lines += [f"  {line}" for line in result.stragglers]
    if result.profile_samples:
        lines.append(f"controller profile: {result.profile_samples} samples (py-spy, 50 Hz, busy threads)")
        lines.append("  own samples (top of the stack):")
        lines += [f"    {count / result.profile_samples:6.1%}  {frame}" for frame, count in result.profile_own]
        lines.append("  total samples (anywhere in the stack):")
        lines += [f"    {count / result.profile_samples:6.1%}  {frame}" for frame, count in result.profile_total]
    targets = targets_for(result.cloud_provider, result.pods, result.hostname_spread)
    checks = [
        _check("time to all Running", result.running_seconds if result.running_pods >= result.pods else None,
               targets.running_seconds, True, " s"),
        _check("cpu utilisation", n.cpu_utilisation, targets.cpu_utilisation, False),
        _check("memory utilisation", n.memory_utilisation, targets.memory_utilisation, False),
        _check("controller P95 RSS", result.controller_p95_rss_mib, targets.p95_rss_mib, True, " MiB"),
        _check("controller average CPU", result.controller_average_cores, targets.average_cpu_cores, True, " cores"),
    ]
    checks = [c for c in checks if c]
    if checks:
        lines.append("targets:")
        lines += checks
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale_out",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cloud-provider", choices=("kwok", "aws"), default="kwok",
                        help="kwok: instances are kwok Nodes; aws: EC2 on the local moto server (default kwok)")
    parser.add_argument("--pods", type=int, default=1000, help="pods in all, half of each shape (default 1000)")
    parser.add_argument("--hostname-spread", choices=("all", "small"), default=None,
                        help="a kubernetes.io/hostname topology spread on every pod, or on the small Deployment only "
                        "(the suite's host_name_spreading_test.go)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for every pod Running (default 900)")
    parser.add_argument("--name", default=None, help="the local cluster's name (default scale-out-<provider>)")
    parser.add_argument("--profile", action="store_true", help="sample the controller with py-spy during the scale-out")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    parser.add_argument("--scheduler-feature-gates", default=None, metavar="GATES",
                        help="kube-scheduler's --feature-gates, e.g. SchedulerAsyncAPICalls=true "
                        "('' for none; default: the local cluster's, none)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=None, metavar="N",
                        help="kube-scheduler's percentageOfNodesToScore (0: its adaptive default; "
                        "default: deploy/scheduler's, 100)")
    parser.add_argument("--controller-env", type=controller_variable, action="append", default=[],
                        metavar="GROUPLESS_NAME=VALUE",
                        help="a setting of the controller for this run (repeatable), e.g. "
                        "GROUPLESS_UNTRIED_POD_GRACE=5 or GROUPLESS_LOG_LEVEL=debug; default: the local cluster's")
    args = parser.parse_args(argv)
    if args.pods < 2:
        parser.error(f"--pods must be at least 2, got {args.pods}")
    if args.scheduler_feature_gates is not None:
        try:
            parse_gates(args.scheduler_feature_gates)
        except ValueError as error:
            parser.error(str(error))

    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    from localcluster.cli import terminate_like_interrupt

    terminate_like_interrupt()  # SIGTERM stops the cluster like Ctrl-C
    result = run(args, say)
    print("\n".join(summary(result)))
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2, default=str))
    return 0 if result.running_pods >= result.pods else 1


if __name__ == "__main__":
    sys.exit(main())
