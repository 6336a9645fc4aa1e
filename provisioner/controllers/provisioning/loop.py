"""The provisioning controller: pending pods in, right-sized nodes launched and nominated out.

The loop (DESIGN.md "Data flow"; Karpenter's ``provisioning/controller.go``): pods that
kube-scheduler marked Unschedulable (seen through the cluster state cache, or signalled by the
extender through :meth:`ProvisioningController.trigger`) open a batching window
(:mod:`~provisioner.controllers.provisioning.batcher`); when it closes, one round
(:meth:`ProvisioningController.begin`) takes a snapshot of the cluster and hands it to the
:class:`~provisioner.controllers.provisioning.provisioner.NodeProvisioner`, which solves and
starts the launches, then finishes the round (launch outcomes, ICE retries) on a round thread
while the loop goes back to batching: the next window opens and closes on its own timers
whatever the previous round's launches are doing, and is solved as soon as it closes. One
solve runs at a time; at most ``max_rounds`` rounds are in flight (the loop waits for one to
end before solving another). A round in flight mostly waits for its launches, which share the
launcher's pool, so the bound is generous (16): a round on a slow cloud takes minutes (150 pods
on a loaded moto server: 100-200 s), and while every slot is taken the next window waits. The expiration
controller asks for replacement capacity through :meth:`ProvisioningController.replace`.
Before the first batch, and for each Provisioner created later, the instance types are fetched
ahead (:meth:`ProvisioningController.warm_up`). A round first adopts the instances launched
without a Node when adoption is due (:mod:`~provisioner.controllers.provisioning.adoption`:
before a leader's first round, and after a launch that may have left one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock
from provisioner.cloudprovider.types import CloudProvider, LoggingCloudProvider
from provisioner.controllers.provisioning.adoption import Adoption, AdoptionResult
from provisioner.controllers.provisioning.batcher import Batch, Batcher
from provisioner.controllers.provisioning.inputs import SolverInputs
from provisioner.controllers.provisioning.launcher import Launcher
from provisioner.controllers.provisioning.provisioner import (
    NodeProvisioner,
    ProvisionResult,
    format_duration,
    replacement_nodes,
)
from provisioner.kube.api import KubeAPI, Object, WatchEvent
from provisioner.kube.events import EventRecorder
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.pods import awaits_capacity, not_provisionable_reason
from provisioner.scheduling.solver import Plan, SolverInput, solve
from provisioner.settings import ProvisioningSettings
from provisioner.state.cluster import ClusterState
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)


def _nominated_on(node: Mapping[str, Any]) -> Collection[str]:
    """UIDs of the pods a Node's ``groupless.dev/nominations`` annotation names (deadline not considered)."""
    raw = objects.annotations_of(node).get(wk.NOMINATIONS_ANNOTATION)
    return nom.decode(raw if isinstance(raw, str) else None).pods


class ProvisioningController:
    """Launches nodes for provisionable pods. See the module docstring.

    ``trigger(uid)`` signals a pending pod (or, with None, "look at every pending pod");
    ``run(stop)`` is the loop; ``begin(batch)`` starts one round (the loop calls it when a
    window closes) and ``reconcile(batch)`` runs one to its end (tests call it directly);
    ``replace(pods, node_name)`` is the expiration controller's Replacer. ``max_rounds``:
    rounds in flight at once (solved, launches running).
    """

    def __init__(
        self,
        api: KubeAPI,
        state: ClusterState,
        cloud: CloudProvider,
        clock: Clock,
        recorder: EventRecorder,
        settings: ProvisioningSettings | None = None,
        *,
        solver: Callable[[SolverInput], Plan] = solve,
        max_rounds: int = 16,
    ) -> None:
        self.state = state
        self.clock = clock
        self.settings = settings or ProvisioningSettings()
        self.cloud = LoggingCloudProvider.around(cloud)  # the walkthrough's launch line
        batching = self.settings.batching
        self.batcher = Batcher(clock, batching.idle_seconds, batching.max_seconds, batching.max_pods)
        self.ledger = InFlightLedger(nominated_on=_nominated_on)
        self.adoption = Adoption(api, self.cloud, clock, recorder, self.ledger, self.settings.nodes)
        self.launcher = Launcher(api, self.adoption.watch(self.cloud), clock, self.settings,
                                 awaits_capacity=lambda uid: awaits_capacity(state.pod(uid)),
                                 leave_for_adoption=self.adoption.mark_due)
        self.provisioner = NodeProvisioner(
            api,
            clock,
            recorder,
            self.settings,
            self.ledger,
            SolverInputs(clock, self.cloud, self.ledger, recorder, state.node_views, self.settings.nodes.labels),
            self.launcher,
            solver,
            snapshot=state.snapshot,
            rounds=max_rounds,
        )
        self._rounds = threading.BoundedSemaphore(max(1, max_rounds))  # rounds in flight
        self._warming_lock = threading.Lock()
        self._warming: set[str] = set()  # Provisioners whose instance types are being fetched ahead
        self._unsubscribe: Callable[[], None] | None = None

    # ------------------------------------------------------------------ signals
    def trigger(self, pod_uid: str | None = None) -> None:
        """Signal a pod that nothing fits (``pod_uid``) or ask for a look at every pending pod (None)."""
        self.batcher.add(pod_uid)

    def watch_state(self) -> None:
        """Subscribe to the cluster state cache: provisionable pods open or extend a batch."""
        if self._unsubscribe is None:
            self._unsubscribe = self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, event: WatchEvent) -> None:
        if kind == "Node":
            # Only a deletion ends our memory of a node here. An ADDED/MODIFIED event is not
            # enough: a round may have taken its snapshot just before the event arrived, and
            # must still see the node (and its nominations) through our memory; the next
            # round's snapshot releases it (InFlightLedger.release).
            if event.type == "DELETED":
                self.ledger.forget_node(str((event.object.get("metadata") or {}).get("name") or ""))
            return
        if kind != "Pod" or event.type == "DELETED":
            return
        if not_provisionable_reason(event.object) is None:
            uid = objects.uid(event.object)
            if self.ledger.covers(uid):
                return  # capacity is on its way: no new window for it
            self.batcher.add(uid)

    # ------------------------------------------------------------------ warm-up
    def warm_up(self, provisioners: Sequence[Provisioner] | None = None) -> None:
        """Fetch the instance types of ``provisioners`` (default: every one cached) once, ahead of a batch.

        A cloud provider builds its instance-type catalog lazily (EC2: DescribeInstanceTypes and
        offerings, ~1,400 types, seconds); doing it before the first burst takes it off the
        first packing's latency. Errors are logged at debug level: the round reports them.
        Synchronous; the loop runs it on a daemon thread.
        """
        if provisioners is None:
            provisioners = list(self.state.snapshot().provisioners.values())
        for provisioner in provisioners:
            started = self.clock.monotonic()
            try:
                with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="get_instance_types"):
                    count = len(self.cloud.get_instance_types(provisioner))
            except Exception as exc:  # the first round reports it properly
                log.debug("Could not warm the instance types of %s: %s", provisioner.name, exc)
                continue
            finally:
                with self._warming_lock:
                    self._warming.discard(provisioner.name)
            log.info(
                "Fetched %d instance types for Provisioner %s in %s",
                count,
                provisioner.name,
                format_duration(self.clock.monotonic() - started),
            )

    def _warm_async(self, provisioners: Sequence[Provisioner]) -> None:
        """:meth:`warm_up` on a daemon thread (health, readiness and the loop never wait for it)."""
        with self._warming_lock:
            todo = [p for p in provisioners if p.name not in self._warming]
            self._warming.update(p.name for p in todo)
        if todo:
            threading.Thread(target=self.warm_up, args=(todo,), name="warm-up", daemon=True).start()

    def _warm_added(self, kind: str, event: WatchEvent) -> None:
        """While the loop runs: warm the instance types of each Provisioner created."""
        if kind != "Provisioner" or event.type != "ADDED":
            return
        name = str((event.object.get("metadata") or {}).get("name") or "")
        provisioner = self.state.snapshot().provisioners.get(name) if name else None
        if provisioner is not None:
            self._warm_async([provisioner])

    # ------------------------------------------------------------------ loop
    def run(self, stop: threading.Event) -> None:
        """Batch and provision until ``stop`` is set. Waits for the state cache to sync first."""
        self.watch_state()
        while not stop.is_set() and not self.state.wait_synced(1.0):
            pass
        stop_warming = self.state.subscribe(self._warm_added)
        self._warm_async(list(self.state.snapshot().provisioners.values()))
        log.info("Waiting for unschedulable pods")
        self.trigger(None)  # pods pending since before we started
        try:
            while not stop.is_set():
                batch = self.batcher.wait(stop, timeout=self._next_wake())
                if stop.is_set():
                    break
                if batch is None:
                    self.trigger(None)  # periodic resync: a missed event only delays
                    continue
                while not self._rounds.acquire(timeout=0.5):  # a round slot (the batcher keeps collecting)
                    if stop.is_set():
                        return
                try:
                    pending = self.begin(batch)
                except Exception:
                    self._rounds.release()
                    log.exception("Provisioning failed")
                    continue
                pending.add_done_callback(self._round_ended)
        finally:
            stop_warming()
            self.provisioner.shutdown()
            self.launcher.shutdown()

    def _round_ended(self, pending: Future[ProvisionResult]) -> None:
        """A round of the loop ended: its slot is free; its failure is logged."""
        self._rounds.release()
        error = pending.exception()
        if error is not None:
            log.error("Provisioning failed", exc_info=error)
        elif pending.result().pods:
            log.info("Waiting for unschedulable pods")

    def _next_wake(self) -> float:
        """Seconds until the loop looks again unprompted.

        The resync period, or sooner when a Provisioner's back-off ends (its pods still wait).
        """
        return max(0.05, min([self.settings.resync_seconds, *self.launcher.backoff.ends()]))

    # ------------------------------------------------------------------ rounds
    def reconcile(self, batch: Batch | None = None) -> ProvisionResult:
        """One round now, to its end (:meth:`begin`, then wait)."""
        return self.begin(batch).result()

    def begin(self, batch: Batch | None = None) -> Future[ProvisionResult]:
        """Start one round now: prune ended nominations, then solve for every provisionable pod and launch.

        Returns once the solve is done and the launches started; the future ends with the
        round. ``batch`` is the window that led here (for the "Batched N pods in D" line and
        the batch metrics; N counts the provisionable pods found, which includes pods still
        pending from earlier rounds).
        """
        if not self.state.synced():
            log.info("Cluster state is not synced yet; not provisioning")
            done: Future[ProvisionResult] = Future()
            done.set_result(ProvisionResult())
            return done
        with self.provisioner.solving:  # no other solve between this snapshot and this round's launches
            snapshot = self.state.snapshot()
            self.adoption.adopt_if_due(snapshot)
            pods = self.provisioner.provisionable(snapshot)
            if batch is not None:
                if pods:
                    metrics.BATCH_SIZE.observe(len(pods))
                    metrics.BATCH_DURATION.observe(batch.duration)
                    log.info("Batched %d pods in %s", len(pods), format_duration(batch.duration))
                else:
                    log.debug("No provisionable pods after a %s window", format_duration(batch.duration))
            return self.provisioner.begin(snapshot, pods)

    def adopt(self) -> AdoptionResult | None:
        """Adopt the instances launched without a Node (:mod:`~provisioner.controllers.provisioning.adoption`) now.

        The controller process calls it once its cache has synced, before any round; None when
        the cache is not synced yet (the first round then adopts first).
        """
        if not self.state.synced():
            return None
        with self.provisioner.solving:
            return self.adoption.adopt(self.state.snapshot())

    def replace(self, pods: Sequence[Object], node_name: str) -> list[str]:
        """The expiration controller's ``Replacer``: capacity for ``pods`` anywhere but ``node_name``.

        Returns the nodes the expiring node must wait for (launched, or existing capacity the
        pods were placed on; empty: nothing to wait for). Raises
        :class:`~provisioner.controllers.provisioning.provisioner.ReplacementError` when some
        launch failed (limits, back-off, no offering, the cache not synced yet), so the caller
        keeps the node and retries later. See :meth:`NodeProvisioner.replace`.
        """
        return self.replace_nodes({node_name: pods})

    def replace_nodes(self, pods_by_node: Mapping[str, Sequence[Object]],
                      adjust: Callable[[Plan], Plan] | None = None) -> list[str]:
        """Consolidation's replacer: capacity for the pods of several nodes (name -> pods), solved together.

        As :meth:`replace`, for all the nodes at once; ``adjust`` narrows each plan before its
        launches (:meth:`NodeProvisioner.replace_nodes`).
        """
        if not self.state.synced():
            not_synced = ProvisionResult(
                failed={objects.key(p): "the cluster state is not synced yet" for pods in pods_by_node.values()
                        for p in pods},
                pods=sum(len(pods) for pods in pods_by_node.values()),
            )
            return replacement_nodes(not_synced, next(iter(pods_by_node), ""))
        with self.provisioner.solving:
            return self.provisioner.replace_nodes(self.state.snapshot(), pods_by_node, adjust)
