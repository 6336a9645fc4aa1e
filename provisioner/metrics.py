"""Prometheus metrics of every Groupless process, in one module so names never drift.

Why one module: the webhook, the extender and the controller each serve ``/metrics``
(``prometheus_client`` default registry), dashboards and alerts key on these names, and the
docs' metrics list is checked against this file by a test. Every metric is named
``groupless_<area>_<what>_<unit>`` and carries only *bounded* labels: provisioner, method,
outcome, reason, verb, resource, endpoint, and node names for the per-node gauges (bounded
by the cluster size, as Karpenter's ``karpenter_nodes_*`` gauges are). Never pod names, pod
UIDs, namespaces or error messages: an unbounded label is a memory leak in Prometheus.

Usage from the other parts::

    from provisioner import metrics
    with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="create"):
        ...  # outcome: "success", or the exception's class in snake_case ("insufficient_capacity")
    metrics.NODES_LAUNCHED.labels(provisioner="default", capacity_type="spot", zone="us-west-2a").inc()

Durations are in seconds and batch sizes in pods. Resource gauges use Prometheus base units:
cpu in cores (the core's milli-CPU / 1000), memory and storage in bytes, counts as counts
(:func:`resource_value` converts). The state gauges are refreshed from the controller's cache at
each scrape (:func:`track_cluster_state`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from provisioner.state.nodes import StateNode

NAMESPACE = "groupless"

#: Latency buckets in seconds, 1 ms .. 60 s: extender and webhook answers sit in the low
#: milliseconds (the chart's extender httpTimeout is 2 s), EC2 calls in 0.1-10 s, batches up
#: to the 10 s window and solves of very large batches beyond.
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
)

#: Batch sizes in pods; the batcher closes a window at 2,000 pods (Karpenter's limit).
BATCH_SIZE_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2000)

#: Outcome label values of :data:`EVICTIONS` (the Eviction API's answers, see termination).
EVICTION_OUTCOMES = ("evicted", "pdb_blocked", "not_found", "error")

# --- provisioning -----------------------------------------------------------------------

BATCH_SIZE = Histogram(
    "groupless_provisioner_batch_size_pods",
    "Number of pending pods in each closed batching window (the walkthrough's 'Batched N pods').",
    buckets=BATCH_SIZE_BUCKETS,
)
"""Pods per batch: how many unschedulable pods one provisioning round considered."""

BATCH_DURATION = Histogram(
    "groupless_provisioner_batch_duration_seconds",
    "Time from the first pod of a batching window to the window closing (1 s idle / 10 s max).",
    buckets=DURATION_BUCKETS,
)
"""Length of each batching window, in seconds."""

SOLVE_DURATION = Histogram(
    "groupless_provisioner_solve_duration_seconds",
    "Time spent computing the packing (pure solver) for one batch.",
    buckets=DURATION_BUCKETS,
)
"""Duration of one ``solve()`` over a batch, in seconds."""

PODS_NOMINATED = Counter(
    "groupless_provisioner_pods_nominated_total",
    "Pods nominated to a node launched for them (groupless.dev/nominations annotation).",
    ["provisioner"],
)
"""Pods written into a new node's nominations, by Provisioner."""

LAUNCH_ERRORS = Counter(
    "groupless_provisioner_launch_errors_total",
    "Failed node launches by error type (insufficient_capacity, not_found, limits_exceeded, "
    "unauthorized, throttled, error).",
    ["provisioner", "type"],
)
"""Launch failures by Provisioner and typed error (the CloudProvider's error class, snake_cased)."""

NODES_LAUNCHED = Counter(
    "groupless_nodes_launched_total",
    "Nodes launched (instance created and Node object registered).",
    ["provisioner", "capacity_type", "zone"],
)
"""Nodes launched, by Provisioner, capacity type (spot/on-demand) and zone."""

NODES_TERMINATED = Counter(
    "groupless_nodes_terminated_total",
    "Nodes terminated, by reason (provisioner_deleted, emptiness, expiration, consolidation, deleted).",
    ["provisioner", "reason"],
)
"""Nodes whose instance was terminated and Node object removed, by reason."""

ORPHAN_INSTANCES = Counter(
    "groupless_orphan_instances_total",
    "Instances found without a Node (a launch that ended before its Node was written), by outcome: "
    "adopted (its Node written from the instance's tags) or terminated (no Provisioner could own it).",
    ["provisioner", "outcome"],
)
"""Instances adoption wrote a Node for or terminated, by Provisioner ("" when untagged) and outcome."""

EVICTIONS = Counter(
    "groupless_evictions_total",
    "Eviction API calls made while draining nodes, by outcome "
    "(evicted, pdb_blocked = HTTP 429 from a PodDisruptionBudget, not_found, error).",
    ["outcome"],
)
"""Evictions during termination, by outcome (see :data:`EVICTION_OUTCOMES`)."""

CONSOLIDATION_ACTIONS = Counter(
    "groupless_consolidation_actions_total",
    "Consolidation moves, by kind (delete, replace) and outcome (started; dropped = the cluster changed "
    "before it acted; failed = no replacement capacity).",
    ["kind", "outcome"],
)
"""Consolidation moves decided, by kind and what came of them."""

CONSOLIDATION_SAVINGS = Counter(
    "groupless_consolidation_savings_usd_per_hour_total",
    "Sum of the USD per hour that started consolidation moves save (the nodes' price minus their "
    "replacements'), by kind (delete, replace).",
    ["kind"],
)
"""USD/hour saved by the consolidation moves started, summed."""

CONSOLIDATION_CANDIDATES = Gauge(
    "groupless_consolidation_candidates",
    "Nodes of consolidating Provisioners at the last consolidation pass, by state (candidate, "
    "unconsolidatable, blocked = their Provisioner has pods pending or a launch in flight).",
    ["state"],
)
"""Nodes eligible for consolidation at the last pass, and those that were not."""

# --- cloud provider ---------------------------------------------------------------------

CLOUDPROVIDER_DURATION = Histogram(
    "groupless_cloudprovider_duration_seconds",
    "Duration of CloudProvider calls (create, delete, get_instance_types, list, ...), by outcome.",
    ["method", "outcome"],
    buckets=DURATION_BUCKETS,
)
"""CloudProvider call latency by method and outcome (success, or the error class snake_cased)."""

# --- extender and webhook ---------------------------------------------------------------

EXTENDER_DURATION = Histogram(
    "groupless_extender_request_duration_seconds",
    "Latency of scheduler extender requests, by verb (filter, prioritize) and HTTP status code.",
    ["verb", "code"],
    buckets=DURATION_BUCKETS,
)
"""Extender answer latency; the scheduler's timeout for an extender is 5 s by default."""

WEBHOOK_DURATION = Histogram(
    "groupless_webhook_request_duration_seconds",
    "Latency of admission webhook requests, by endpoint (mutate, validate), operation "
    "(CREATE, UPDATE, ...) and whether the request was allowed.",
    ["endpoint", "operation", "allowed"],
    buckets=DURATION_BUCKETS,
)
"""Admission latency; the API server's webhook timeout is 10 s by default."""

# --- state gauges -----------------------------------------------------------------------

PROVISIONER_USAGE = Gauge(
    "groupless_provisioner_usage",
    "Resources of the nodes a Provisioner launched (status.resources), by resource; cpu in "
    "cores, memory and storage in bytes.",
    ["provisioner", "resource"],
)
"""What each Provisioner currently owns, the numerator of its limits."""

PROVISIONER_LIMIT = Gauge(
    "groupless_provisioner_limit",
    "spec.limits.resources of a Provisioner, by resource (only limited resources are exported).",
    ["provisioner", "resource"],
)
"""A Provisioner's limits; alert on usage / limit."""

PROVISIONER_USAGE_RATIO = Gauge(
    "groupless_provisioner_usage_ratio",
    "usage / limit of a Provisioner for each limited resource (1.0 = no more launches).",
    ["provisioner", "resource"],
)
"""Usage against limits as a ratio, precomputed for alerts."""

NODE_ALLOCATABLE = Gauge(
    "groupless_node_allocatable",
    "status.allocatable of nodes launched by Groupless, by resource; cpu in cores, memory in bytes.",
    ["node", "provisioner", "resource"],
)
"""Allocatable per node and resource."""

NODE_REQUESTED = Gauge(
    "groupless_node_requested",
    "Sum of the resource requests of the pods bound to a node (DaemonSet pods included), by resource.",
    ["node", "provisioner", "resource"],
)
"""Requested per node and resource; allocatable - requested is the free space."""


def resource_value(resource: str, value: int) -> float:
    """Convert a core quantity (milli-CPU for ``cpu``, bytes or counts otherwise) to Prometheus' base unit.

    Prometheus convention is base units: cpu in cores, memory in bytes. So ``cpu`` is divided
    by 1000 and everything else is returned as a float unchanged.
    """
    return value / 1000.0 if resource == "cpu" else float(value)


def set_resource_gauges(gauge: Gauge, values: Mapping[str, int], **labels: str) -> None:
    """Set ``gauge`` for every resource in ``values`` (core units), with ``labels`` plus ``resource``."""
    for resource, value in values.items():
        gauge.labels(resource=resource, **labels).set(resource_value(resource, value))


def remove_node(node: str, provisioner: str, resources: tuple[str, ...] | None = None) -> None:
    """Drop the per-node series of a deleted node so gauges don't report ghosts.

    ``resources``: the resource label values to remove; by default every series of the node
    currently present. Missing series are ignored.
    """
    for gauge in (NODE_ALLOCATABLE, NODE_REQUESTED):
        names = resources
        if names is None:
            names = tuple(
                sample.labels["resource"]
                for metric in gauge.collect()
                for sample in metric.samples
                if sample.labels.get("node") == node and sample.labels.get("provisioner") == provisioner
            )
        for resource in names:
            try:
                gauge.remove(node, provisioner, resource)
            except KeyError:
                pass


def outcome_of(error: BaseException | None) -> str:
    """The ``outcome`` label for a call: ``success``, or the error's class name in snake_case.

    Class names are bounded (the typed errors of the CloudProvider protocol), unlike messages.
    ``InsufficientCapacityError`` -> ``insufficient_capacity``.
    """
    if error is None:
        return "success"
    name = type(error).__name__.removesuffix("Error") or "error"
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


_gauge_lock = threading.Lock()
#: Label tuples each state gauge was last set for, so series of deleted objects are removed.
_live_series: dict[str, set[tuple[str, ...]]] = {}


def _quantities(resources: Any) -> dict[str, int]:
    """``{"cpu": "4", "memory": "30310Mi"}`` -> core units; unreadable entries are skipped, zeros kept."""
    from provisioner.model.quantity import readable_resource_list

    return readable_resource_list(resources)


def update_cluster_gauges(nodes: Iterable[StateNode], provisioners: Iterable[Mapping[str, Any]]) -> None:
    """Set the per-Provisioner and per-node gauges, dropping stale series.

    - ``provisioners``: Provisioner objects; ``status.resources`` -> :data:`PROVISIONER_USAGE`,
      ``spec.limits.resources`` -> :data:`PROVISIONER_LIMIT` and :data:`PROVISIONER_USAGE_RATIO`
      (usage / limit; ``+Inf`` when the limit is 0 and something is used).
    - ``nodes``: the node views of a snapshot (:meth:`provisioner.state.nodes.NodeViews.nodes`);
      only nodes Groupless launched (labelled ``karpenter.sh/provisioner-name``) are exported:
      their allocatable -> :data:`NODE_ALLOCATABLE`, what their bound pods request
      (kube-scheduler's effective requests, DaemonSet pods included, finished pods excluded)
      -> :data:`NODE_REQUESTED`.

    Series of objects no longer given are removed. Odd objects never raise.
    """
    values: dict[str, dict[tuple[str, ...], float]] = {
        g._name: {} for g in (PROVISIONER_USAGE, PROVISIONER_LIMIT, PROVISIONER_USAGE_RATIO,
                              NODE_ALLOCATABLE, NODE_REQUESTED)
    }
    from provisioner.model import objects

    for obj in provisioners:
        name = objects.name(obj)
        if not name:
            continue
        usage = _quantities(objects.status(obj).get("resources"))
        limits_block = objects.spec(obj).get("limits")
        limits = _quantities(limits_block.get("resources") if isinstance(limits_block, Mapping) else None)
        for resource, amount in usage.items():
            values[PROVISIONER_USAGE._name][(name, resource)] = resource_value(resource, amount)
        for resource, limit in limits.items():
            used = usage.get(resource, 0)
            values[PROVISIONER_LIMIT._name][(name, resource)] = resource_value(resource, limit)
            ratio = used / limit if limit else (float("inf") if used else 0.0)
            values[PROVISIONER_USAGE_RATIO._name][(name, resource)] = ratio
    for node in nodes:
        if node.provisioner is None:
            continue
        for resource, amount in node.allocatable.items():
            values[NODE_ALLOCATABLE._name][(node.name, node.provisioner, resource)] = resource_value(resource, amount)
        for resource, amount in node.requested.items():
            values[NODE_REQUESTED._name][(node.name, node.provisioner, resource)] = resource_value(resource, amount)
    with _gauge_lock:
        for gauge in (PROVISIONER_USAGE, PROVISIONER_LIMIT, PROVISIONER_USAGE_RATIO, NODE_ALLOCATABLE, NODE_REQUESTED):
            current = values[gauge._name]
            for labels_tuple, value in current.items():
                gauge.labels(*labels_tuple).set(value)
            for stale in _live_series.get(gauge._name, set()) - current.keys():
                try:
                    gauge.remove(*stale)
                except KeyError:
                    pass
            _live_series[gauge._name] = set(current)


@contextmanager
def time_call(histogram: Histogram, **labels: Any) -> Iterator[dict[str, str]]:
    """Observe the duration of the ``with`` body in ``histogram``, in seconds.

    ``labels`` are the histogram's labels; if the histogram has an ``outcome`` label that is not
    given, it is set to ``success`` or to :func:`outcome_of` the exception (which is re-raised).
    The yielded dict may be updated inside the body to set labels known only at the end
    (e.g. ``extra["code"] = "200"``). Histograms without labels are observed directly.
    """
    extra: dict[str, str] = {}
    started = time.perf_counter()
    error: BaseException | None = None
    try:
        yield extra
    except BaseException as exc:
        error = exc
        raise
    finally:
        elapsed = time.perf_counter() - started
        names = getattr(histogram, "_labelnames", ())
        values = {k: str(v) for k, v in labels.items()}
        values.update(extra)
        if "outcome" in names and "outcome" not in values:
            values["outcome"] = outcome_of(error)
        if names:
            histogram.labels(**{n: values.get(n, "") for n in names}).observe(elapsed)
        else:
            histogram.observe(elapsed)


#: Every metric of this module, for the docs test and for ``/metrics`` smoke checks.
ALL_METRICS = (
    BATCH_SIZE, BATCH_DURATION, SOLVE_DURATION, PODS_NOMINATED, LAUNCH_ERRORS, NODES_LAUNCHED,
    NODES_TERMINATED, ORPHAN_INSTANCES, EVICTIONS, CONSOLIDATION_ACTIONS, CONSOLIDATION_SAVINGS,
    CONSOLIDATION_CANDIDATES, CLOUDPROVIDER_DURATION, EXTENDER_DURATION, WEBHOOK_DURATION,
    PROVISIONER_USAGE, PROVISIONER_LIMIT, PROVISIONER_USAGE_RATIO, NODE_ALLOCATABLE, NODE_REQUESTED,
)


def metric_names() -> list[str]:
    """Exposition names of every Groupless metric (counters with their ``_total`` suffix)."""
    names = []
    for metric in ALL_METRICS:
        base = metric._name  # prometheus_client strips _total from counters internally
        names.append(f"{base}_total" if isinstance(metric, Counter) else base)
    return names


_scrape_hooks: list[Callable[[], None]] = []


def on_scrape(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` before every :func:`exposition` (e.g. to refresh gauges from a cache).

    A failing hook is logged and skipped: a scrape never fails because of one. Returns a
    function that unregisters the hook.
    """
    _scrape_hooks.append(hook)

    def unregister() -> None:
        if hook in _scrape_hooks:
            _scrape_hooks.remove(hook)

    return unregister


def track_cluster_state(state: Any) -> Callable[[], None]:
    """Refresh the state gauges from ``state.snapshot()`` at every scrape.

    ``state``: a :class:`provisioner.state.ClusterState` (anything whose ``snapshot()`` is a
    :class:`~provisioner.state.cluster.Snapshot`); nodes are read through its ``node_views``
    (the views the extender and the provisioning controller share), or views of our own.
    The controller calls this once at start-up. When the snapshot's ``resource_versions``
    (kind -> last version seen) did not move since the previous scrape, the refresh is skipped.
    Returns the unregister function of :func:`on_scrape`.
    """
    from provisioner.state.nodes import NodeViews

    shared = getattr(state, "node_views", None)
    views = shared if isinstance(shared, NodeViews) else NodeViews()
    last: list[Any] = [None]

    def refresh() -> None:
        snapshot = state.snapshot()
        versions = getattr(snapshot, "resource_versions", None)
        if versions and versions == last[0]:
            return  # nothing changed since the last scrape: the gauges are current
        update_cluster_gauges(views.nodes(snapshot).values(), snapshot.provisioner_objects.values())
        last[0] = dict(versions) if versions else None

    return on_scrape(refresh)


def exposition() -> tuple[bytes, str]:
    """Body and Content-Type of a ``/metrics`` answer from the default registry.

    For the flask apps: ``body, ctype = exposition(); return Response(body, content_type=ctype)``.
    Runs the :func:`on_scrape` hooks first.
    """
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    for hook in list(_scrape_hooks):
        try:
            hook()
        except Exception:  # a broken hook must not break the scrape
            logging.getLogger(__name__).exception("metrics scrape hook failed")
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def markdown_table() -> str:
    """The metrics list of ``docs/metrics.md``: one row per metric (name, type, labels, help).

    ``python -m provisioner.metrics`` prints it; a test checks the docs hold exactly this table.
    """
    kinds = {Counter: "counter", Histogram: "histogram", Gauge: "gauge"}
    rows = ["| metric | type | labels | description |", "|---|---|---|---|"]
    for metric, name in zip(ALL_METRICS, metric_names(), strict=True):
        kind = next(k for cls, k in kinds.items() if isinstance(metric, cls))
        labels = ", ".join(f"`{label}`" for label in metric._labelnames) or "none"
        rows.append(f"| `{name}` | {kind} | {labels} | {metric._documentation} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
