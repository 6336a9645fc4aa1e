"""The controller manager: routes watch events to the lifecycle controllers and runs their requeues.

One :class:`~provisioner.controllers.workqueue.WorkQueue` holds every pending reconcile, keyed
``("node", controller, node name)``, ``("provisioner", "counter", name)`` or ``("gc",)``, so each
controller of each object has its own requeue time and backoff, a key is never reconciled by
two workers at once, and bursts of events collapse into one reconcile. Events map to keys the
way Karpenter's watches do: a Node change wakes every node controller for it; a Pod change wakes
emptiness, termination and expiration of its node; a Provisioner change wakes its counter and
its nodes (a TTL may have changed, or it was deleted). A periodic resync re-enqueues everything,
so a lost event only delays, never loses, a decision.

Tests subscribe :meth:`Manager.on_change` to a ``FakeKubeAPI`` and call
:meth:`Manager.run_until_idle` between steps of a :class:`~provisioner.clock.FakeClock`; the
process subscribes it to the :class:`~provisioner.state.cluster.ClusterState` informers and runs
:meth:`Manager.run_workers`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Protocol

from provisioner.controllers import objects
from provisioner.controllers.counter import CounterController
from provisioner.controllers.emptiness import EmptinessController
from provisioner.controllers.expiration import ExpirationController, Replacer
from provisioner.controllers.garbagecollection import GarbageCollector
from provisioner.controllers.initialization import InitializationController
from provisioner.controllers.objects import Context
from provisioner.controllers.ownership import OwnershipController
from provisioner.controllers.result import Result
from provisioner.controllers.termination import TerminationController
from provisioner.controllers.workqueue import Key, WorkQueue
from provisioner.kube.api import (
    ApiError,
    ConflictError,
    Object,
    WatchEvent,
)
from provisioner.model import replacements
from provisioner.settings import ControllerSettings

log = logging.getLogger(__name__)

GC_KEY: Key = ("gc",)


class NodeReconciler(Protocol):
    name: str

    def reconcile(self, node: Object) -> Result: ...


class Manager:
    """All lifecycle controllers behind one work queue.

    ``replacer`` launches replacement capacity for expiring nodes (see
    :class:`~provisioner.controllers.expiration.Replacer`); without it, an expired node is
    deleted at once and its pods wait for the provisioning controller.
    """

    def __init__(self, ctx: Context, settings: ControllerSettings | None = None, *,
                 replacer: Replacer | None = None, gc_interval: float = 30.0) -> None:
        self.ctx = ctx
        self.settings = settings or ControllerSettings()
        self.queue = WorkQueue(ctx.clock)
        self.termination = TerminationController(ctx)
        self.initialization = InitializationController(
            ctx,
            registration_timeout=self.settings.nodes.registration_timeout_seconds,
            nomination_ttl=self.settings.nodes.nomination_ttl_seconds,
        )
        self.ownership = OwnershipController(ctx)
        self.expiration = ExpirationController(ctx, replacer)
        self.emptiness = EmptinessController(ctx)
        self.counter = CounterController(ctx)
        self.gc = GarbageCollector(ctx, grace=self.settings.gc_grace_seconds, interval=gc_interval)
        self.node_controllers: dict[str, NodeReconciler] = {
            c.name: c for c in (self.termination, self.initialization, self.ownership, self.expiration, self.emptiness)
        }
        self.reconciles = 0
        self.errors = 0
        self._provisioner_versions: dict[str, tuple[object, ...]] = {}

    # ---- event routing ------------------------------------------------------------------------

    def enqueue_node(self, name: str, controllers: Iterable[str] | None = None, delay: float = 0.0) -> None:
        for controller in controllers if controllers is not None else self.node_controllers:
            self.queue.add(("node", controller, name), delay)

    def enqueue_provisioner(self, name: str, delay: float = 0.0) -> None:
        self.queue.add(("provisioner", "counter", name), delay)

    def on_change(self, kind: str, event: WatchEvent) -> None:
        """Map one watch event to the reconciles it calls for (never reconciles inline)."""
        obj = event.object
        if event.type == "BOOKMARK":
            return
        if kind == "Node":
            self.enqueue_node(objects.name(obj))
            for replacement in replacements.recorded(obj) or ():
                self.enqueue_node(replacement, ("emptiness",))  # it is protected only while this node exists
            owner = objects.provisioner_of(obj)
            if owner:
                self.enqueue_provisioner(owner)
        elif kind == "Pod":
            node_name = (obj.get("spec") or {}).get("nodeName")
            if node_name:
                self.enqueue_node(str(node_name), ("emptiness", "termination", "expiration"))
        elif kind == "Provisioner":
            name = objects.name(obj)
            self.enqueue_provisioner(name)
            meta = objects.meta(obj)
            version = (meta.get("uid"), meta.get("generation"), meta.get("deletionTimestamp"), event.type)
            if self._provisioner_versions.get(name) == version:
                return  # a status write (the counter's own): the nodes' decisions do not change
            self._provisioner_versions[name] = version
            try:
                nodes = self.ctx.nodes(name)
            except ApiError as error:
                log.warning("Failed to list nodes of Provisioner %s: %s", name, error)
                return
            for node in nodes:
                self.enqueue_node(objects.name(node), ("ownership", "expiration", "emptiness"))

    def resync(self) -> None:
        """Enqueue every node controller for every Node, the counter of every Provisioner, and GC."""
        for node in self.ctx.all("Node"):
            self.enqueue_node(objects.name(node))
        for provisioner in self.ctx.all("Provisioner"):
            self.enqueue_provisioner(objects.name(provisioner))
        self.queue.add(GC_KEY)

    # ---- processing ---------------------------------------------------------------------------

    def _reconcile(self, key: Key) -> Result:
        assert isinstance(key, tuple)
        if key == GC_KEY:
            return self.gc.reconcile()
        kind, controller, name = key
        if kind == "provisioner":
            provisioner = self.ctx.read("Provisioner", name)
            return Result.done() if provisioner is None else self.counter.reconcile(provisioner)
        node = self.ctx.read("Node", name)
        return Result.done() if node is None else self.node_controllers[controller].reconcile(node)

    def process(self, key: Key) -> None:
        """Reconcile one key (already popped from the queue) and requeue it as its Result says."""
        try:
            self.reconciles += 1
            result = self._reconcile(key)
        except ConflictError:
            self.queue.done(key)
            self.queue.add_rate_limited(key)  # written meanwhile (or a stale cache read): read again, redo
            return
        except Exception as error:  # a controller must never die of one object
            self.errors += 1
            self.queue.done(key)
            delay = self.queue.add_rate_limited(key)
            log.error("Reconcile of %s failed (retry in %.1fs): %s", key, delay, error, exc_info=not isinstance(error, ApiError))
            return
        self.queue.forget(key)
        self.queue.done(key)
        if result.requeue_after is not None:
            self.queue.add(key, result.requeue_after)

    def run_once(self) -> int:
        """Process every key due now (on the injected clock); returns how many were processed."""
        count = 0
        while (key := self.queue.pop_due()) is not None:
            self.process(key)
            count += 1
        return count

    def run_until_idle(self, max_reconciles: int = 10_000) -> int:
        """:meth:`run_once` until nothing is due now; RuntimeError if it does not settle (a hot loop)."""
        total = 0
        while (count := self.run_once()) > 0:
            total += count
            if total > max_reconciles:
                raise RuntimeError(f"controllers did not settle after {total} reconciles")
        return total

    def run_workers(self, stop: threading.Event, workers: int = 4) -> list[threading.Thread]:
        """Start ``workers`` threads processing the queue until ``stop`` is set."""

        def work() -> None:
            while not stop.is_set():
                key = self.queue.get(timeout=0.5)
                if key is not None:
                    self.process(key)

        threads = [threading.Thread(target=work, name=f"controller-{i}", daemon=True) for i in range(workers)]
        for thread in threads:
            thread.start()
        return threads


class PodsByNode:
    """Pods bound to each node (terminal ones included), fed by the cluster state's Pod events.

    The manager's ``pods_on_node``: an index kept current by subscription, so a reconcile reads
    one node's pods without copying a whole cluster snapshot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Object]] = {}
        self._node_of: dict[str, str] = {}

    def __call__(self, node_name: str) -> list[Object]:
        with self._lock:
            return list(self._pods.get(node_name, {}).values())

    def on_change(self, kind: str, event: WatchEvent) -> None:
        if kind != "Pod" or event.type == "BOOKMARK":
            return
        pod = event.object
        key = str(objects.meta(pod).get("uid") or objects.ref(pod))
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        with self._lock:
            previous = self._node_of.pop(key, None)
            if previous is not None:
                self._pods.get(previous, {}).pop(key, None)
            if event.type != "DELETED" and node_name:
                self._pods.setdefault(node_name, {})[key] = pod
                self._node_of[key] = node_name


def resync_loop(manager: Manager, stop: threading.Event, period: float) -> None:
    """Call :meth:`Manager.resync` every ``period`` seconds until ``stop``."""
    while not stop.is_set():
        try:
            manager.resync()
        except Exception as error:  # noqa: BLE001
            log.warning("Resync failed: %s", error)
        stop.wait(period)


__all__ = ["Manager", "PodsByNode", "resync_loop"]
