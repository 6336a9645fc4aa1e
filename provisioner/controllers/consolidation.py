"""Consolidation: remove nodes whose pods fit elsewhere, replace sets of nodes with fewer or cheaper ones.

For Provisioners with ``spec.consolidation.enabled`` (Karpenter v0.15-v0.31). One pass every
``consolidation.interval_seconds`` (:meth:`ConsolidationController.run_once`):

1. **decide**: the candidates and the base solver input of the current snapshot
   (:func:`provisioner.state.consolidation.consolidation_input`), the best move by savings per
   disrupted pod (:func:`provisioner.scheduling.consolidation.decide`). A log line gives what
   it would do and save (USD/hour); nodes that are not candidates get an ``Unconsolidatable``
   event with the reason (once per reason).
2. **re-validate** ``consolidation.validation_seconds`` later, just before acting (Karpenter
   waits 15 s): the same nodes must still be candidates with the same pods, and the same set
   simulated on the new snapshot must still be a move of the same kind saving enough; else the
   move is dropped (log line, ``Unconsolidatable`` event, metric ``outcome=dropped``).
3. **act**, reusing the expiry path (Karpenter v1's disruption orchestration): each node is
   tainted ``karpenter.sh/disrupted:NoSchedule`` with the annotation
   ``groupless.dev/disruption-reason: consolidation`` (one write guarded by its
   resourceVersion; kube-scheduler places nothing new there, so the validated move stays
   valid), event ``ConsolidationApproved``; the pods of all the move's nodes get replacement
   capacity together (``replacer``: the provisioning controller's
   :meth:`~provisioner.controllers.provisioning.ProvisioningController.replace_nodes`, which
   launches nothing for pods that fit on existing nodes and holds the room they were planned
   into; a spot replacement is launched only among its cheapest options within the move's
   savings, pinned to spot: :func:`~provisioner.scheduling.consolidation.pin_spot`), recorded on
   each node as ``groupless.dev/replacements``. From there the expiration
   controller waits for the replacements to be Ready and deletes the Node, and termination
   cordons, drains through the Eviction API (PodDisruptionBudgets hold) and terminates
   (:mod:`provisioner.controllers.expiration`, :mod:`provisioner.controllers.termination`).
   When no capacity can be had, the taints come off again and the move counts as ``failed``.

A node tainted for consolidation without a replacement record at the start of a pass is a move
that did not finish (the process stopped between the two writes, or a replacement was lost
before the drain): its taint and reason come off, and the node is decided again later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.cloudprovider.types import CloudProviderError
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.kube.api import ApiError, ConflictError, NotFoundError, Object
from provisioner.model import labels as wk
from provisioner.model import objects as model_objects
from provisioner.model import replacements
from provisioner.model.disruption import do_not_consolidate
from provisioner.model.labels import DISRUPTED_TAINT_KEY
from provisioner.model.resources import Resources
from provisioner.scheduling.consolidation import Candidate, Move, decide, evaluate, max_disrupted, pin_spot
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.solver import Plan
from provisioner.settings import Consolidation as ConsolidationSettings
from provisioner.state.cluster import ClusterState, Snapshot
from provisioner.state.consolidation import (
    TRANSIENT_REASONS,
    ConsolidationInput,
    Stability,
    consolidation_input,
    pod_fingerprint,
)
from provisioner.state.nodes import StateNode
from provisioner.state.solverinput import active_provisioners

log = logging.getLogger(__name__)

DISRUPTED_TAINT = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


class NodesReplacer(Protocol):
    """Launches capacity for the pods of nodes going away (node name -> pods), solved together.

    ``adjust`` narrows each plan before its launches. Returns the nodes to wait for (launched, or
    existing nodes the pods were placed on); raises when some pod got no capacity.
    """

    def __call__(self, pods_by_node: Mapping[str, Sequence[Object]],
                 adjust: Callable[[Plan], Plan] | None = None) -> list[str]: ...


@dataclass(frozen=True)
class PendingMove:
    """A move decided at ``decided_at`` (epoch seconds), with each node's pods then (UIDs)."""

    move: Move
    fingerprints: Mapping[str, frozenset[str]]
    decided_at: float


class ConsolidationController:
    """Decides and starts consolidation moves; see the module docstring.

    ``in_flight``: pods the provisioning controller is launching for; ``launching``:
    Provisioners whose launches are running; ``reserved(snapshot, node names)``: room promised
    per node to the pods of nodes being replaced (all three from its in-flight ledger). ``node_labels``:
    the settings' labels for every launched node.
    """

    name = "consolidation"

    def __init__(self, ctx: Context, state: ClusterState, settings: ConsolidationSettings | None = None, *,
                 replacer: NodesReplacer | None = None,
                 in_flight: Callable[[], Collection[str]] = lambda: (),
                 launching: Callable[[], Collection[str]] = lambda: (),
                 reserved: Callable[[Snapshot, Collection[str]], Mapping[str, Resources]] = lambda s, n: {},
                 node_labels: Mapping[str, str] | None = None) -> None:
        self.ctx = ctx
        self.state = state
        self.settings = settings or ConsolidationSettings()
        self.replacer = replacer
        self.in_flight = in_flight
        self.launching = launching
        self.reserved = reserved
        self.node_labels = dict(node_labels or {})
        self.stability = Stability()
        self.pending: PendingMove | None = None
        self._reported: dict[str, str] = {}
        self._idle: object = None  # what the cluster looked like at the last pass that found no move

    # ------------------------------------------------------------------ the loop
    def run(self, stop: threading.Event) -> None:
        """A pass every ``interval_seconds`` (sooner when a decided move is due) until ``stop``."""
        while not stop.is_set():
            try:
                wait = self.run_once()
            except Exception:  # a pass must never end the loop
                log.exception("Consolidation pass failed")
                wait = self.settings.interval_seconds
            stop.wait(max(0.05, min(wait, self.settings.interval_seconds)))

    def run_once(self) -> float:
        """One pass: re-validate and act on a decided move that is due, else decide; seconds until the next pass."""
        interval = self.settings.interval_seconds
        if not self.state.synced():
            return interval
        now = self.ctx.clock.now()
        snapshot = self.state.snapshot()
        views = self.state.node_views.nodes(snapshot)
        stable = self.stability.observe(views, now)
        self._recover(views)
        pending = self.pending
        if pending is not None:
            wait = pending.decided_at + self.settings.validation_seconds - now
            if wait > 0:
                return wait
            self.pending = None
            given = self._input(snapshot, views, stable, now)
            if given is not None:
                self._validate_and_act(pending, given, views)
            return interval
        settled = frozenset(n for n, since in stable.items() if now >= since + self.settings.settle_seconds)
        key = (settled,
               frozenset((name, pod_fingerprint(v), v.marked_for_deletion, v.ready, v.starting, v.taints, v.price,
                          do_not_consolidate(v.node)) for name, v in views.items()),
               frozenset(model_objects.uid(p) for p in snapshot.pending_pods),
               frozenset((name, p.resource_version) for name, p in snapshot.provisioners.items()),
               frozenset(model_objects.resource_version(b) for b in snapshot.pdbs))
        if key == self._idle:
            return interval  # nothing changed since a pass that found no move
        given = self._input(snapshot, views, stable, now)
        if given is None:
            return interval
        budget = max_disrupted(given.nodes, self.settings.max_disrupted_share, given.disrupted)
        decision = decide(given.base, given.candidates, max_nodes=budget,
                          min_savings_fraction=self.settings.min_savings_fraction,
                          spot_options=self.settings.spot_options)
        self._report(given, decision.refused, budget, views)
        move = decision.move
        if move is None:
            self._idle = key
            return interval
        self._idle = None
        log.info("Consolidation found: %s; re-validating in %gs", move.describe(), self.settings.validation_seconds)
        self.pending = PendingMove(move, {n: pod_fingerprint(views[n]) for n in move.nodes}, now)
        if self.settings.validation_seconds <= 0:
            return self.run_once()
        return self.settings.validation_seconds

    # ------------------------------------------------------------------ inputs
    def instance_types(self, provisioners: Mapping[str, Provisioner]) -> dict[str, list[InstanceType]]:
        """Per Provisioner its instance types; one whose types cannot be fetched is left out (logged)."""
        result: dict[str, list[InstanceType]] = {}
        for name, provisioner in provisioners.items():
            try:
                result[name] = list(self.ctx.cloud.get_instance_types(provisioner))
            except CloudProviderError as error:
                log.warning("Consolidation: could not get the instance types of Provisioner %s: %s", name, error)
        return result

    def _input(self, snapshot: Snapshot, views: Mapping[str, StateNode], stable: Mapping[str, float],
               now: float) -> ConsolidationInput | None:
        provisioners = active_provisioners(snapshot)
        if not any(p.spec.consolidation_enabled for p in provisioners.values()):
            return None
        return consolidation_input(
            snapshot, views, self.instance_types(provisioners), now=now, stable_since=stable,
            settle_seconds=self.settings.settle_seconds, in_flight=self.in_flight(), launching=self.launching(),
            reserved=self.reserved(snapshot, list(views)), node_labels=self.node_labels,
        )

    # ------------------------------------------------------------------ reporting
    def _report(self, given: ConsolidationInput, refused: Mapping[str, str], budget: int,
                views: Mapping[str, StateNode]) -> None:
        """Gauge of candidates; an ``Unconsolidatable`` event on each node whose reason changed."""
        blocked = sum(1 for v in views.values() if v.provisioner in given.blocked)
        metrics.CONSOLIDATION_CANDIDATES.labels(state="candidate").set(len(given.candidates))
        metrics.CONSOLIDATION_CANDIDATES.labels(state="unconsolidatable").set(len(given.unconsolidatable))
        metrics.CONSOLIDATION_CANDIDATES.labels(state="blocked").set(blocked)
        reasons = dict(given.unconsolidatable)
        for names, reason in refused.items():
            if "," not in names:
                reasons.setdefault(names, reason)
        if budget <= 0:
            for candidate in given.candidates:
                reasons.setdefault(candidate.name, "the share of nodes disrupted at once is reached")
        for name, reason in sorted(reasons.items()):
            if self._reported.get(name) == reason or reason in TRANSIENT_REASONS:
                continue  # ends by itself: the node is going, starting, awaited, or its pods just changed
            self._reported[name] = reason
            node = self.ctx.read("Node", name)
            if node is not None:
                self.ctx.events.normal(node, "Unconsolidatable", reason)
        for name in [n for n in self._reported if n not in reasons]:
            del self._reported[name]

    # ------------------------------------------------------------------ acting
    def _validate(self, pending: PendingMove, given: ConsolidationInput, views: Mapping[str, StateNode]) -> Move | str:
        """The move as it stands now, or why it is dropped (see the module docstring, step 2)."""
        by_name: dict[str, Candidate] = {c.name: c for c in given.candidates}
        chosen = []
        for name in pending.move.nodes:
            view = views.get(name)
            if view is None:
                return f"node {name} is gone"
            if pod_fingerprint(view) != pending.fingerprints.get(name):
                return f"the pods of node {name} changed"
            candidate = by_name.get(name)
            if candidate is None:
                why = given.unconsolidatable.get(name) or given.blocked.get(view.provisioner or "") or "not a candidate"
                return f"node {name} is no longer a candidate: {why}"
            chosen.append(candidate)
        if len(chosen) > max_disrupted(given.nodes, self.settings.max_disrupted_share, given.disrupted):
            return "the share of nodes disrupted at once would be exceeded"
        outcome = evaluate(given.base, chosen, min_savings_fraction=self.settings.min_savings_fraction,
                           spot_options=self.settings.spot_options)
        if isinstance(outcome, str):
            return outcome
        if outcome.kind != pending.move.kind:
            return f"it would now {outcome.kind} instead of {pending.move.kind}"
        return outcome

    def _validate_and_act(self, pending: PendingMove, given: ConsolidationInput,
                          views: Mapping[str, StateNode]) -> None:
        outcome = self._validate(pending, given, views)
        if isinstance(outcome, str):
            self._drop(pending.move, outcome)
            return
        self._act(outcome, views)

    def _drop(self, move: Move, why: str) -> None:
        log.info("Consolidation dropped on re-validation (%s): %s", why, move.describe())
        metrics.CONSOLIDATION_ACTIONS.labels(kind=move.kind, outcome="dropped").inc()
        for name in move.nodes:
            node = self.ctx.read("Node", name)
            if node is not None:
                self.ctx.events.normal(node, "Unconsolidatable", f"Consolidation dropped on re-validation: {why}")

    def _act(self, move: Move, views: Mapping[str, StateNode]) -> None:
        """Taint the move's nodes, launch their replacements together, record them (step 3)."""
        tainted: list[str] = []
        for name in move.nodes:
            node = dict(views[name].node)
            patch = objects.guarded(node, {
                "metadata": {"annotations": {objects.DISRUPTION_REASON_ANNOTATION: objects.REASON_CONSOLIDATION}},
                "spec": {"taints": [*objects.taints(node), DISRUPTED_TAINT]},
            })
            try:
                self.ctx.patch("Node", name, patch)
            except (ConflictError, NotFoundError) as error:
                self._lift(tainted)
                self._drop(move, f"node {name} changed before it was tainted ({error})")
                return
            tainted.append(name)
        log.info("Consolidating: %s", move.describe(),
                 extra={"savings_usd_per_hour": round(move.savings, 6), "nodes": list(move.nodes)})
        metrics.CONSOLIDATION_ACTIONS.labels(kind=move.kind, outcome="started").inc()
        metrics.CONSOLIDATION_SAVINGS.labels(kind=move.kind).inc(max(0.0, move.savings))
        pods_by_node = {name: objects.reschedulable(self.ctx.pods(name)) for name in move.nodes}
        for name in move.nodes:
            current = self.ctx.read("Node", name)
            if current is not None:
                self.ctx.events.normal(current, "ConsolidationApproved", move.describe())
        adjust = None
        if any(views[name].capacity_type == wk.CAPACITY_TYPE_SPOT for name in move.nodes):
            budget = move.price * (1 - self.settings.min_savings_fraction)
            adjust = partial(pin_spot, budget=budget, spot_options=self.settings.spot_options)
        try:
            targets = (self.replacer(pods_by_node, adjust)
                       if self.replacer is not None and any(pods_by_node.values()) else [])
        except Exception as error:  # capacity, limits, API errors: keep the nodes
            log.error("Consolidation failed, no replacement capacity (%s): %s", error, move.describe())
            metrics.CONSOLIDATION_ACTIONS.labels(kind=move.kind, outcome="failed").inc()
            self._lift(tainted)
            for name in move.nodes:
                current = self.ctx.read("Node", name)
                if current is not None:
                    self.ctx.events.warning(current, "ReplacementFailed",
                                            f"Consolidation called off, no replacement capacity: {error}")
            return
        record = replacements.encode(t for t in targets if t not in move.nodes)
        for name in move.nodes:
            try:
                self.ctx.patch("Node", name, {"metadata": {"annotations": {replacements.REPLACEMENTS_ANNOTATION: record}}})
            except NotFoundError:
                continue

    def _lift(self, names: Sequence[str]) -> None:
        """Take the consolidation taint and reason off ``names`` (each read again, one guarded write)."""
        for name in names:
            node = self.ctx.read_live("Node", name)
            if node is None or objects.is_deleting(node):
                continue
            body: dict[str, Any] = {
                "metadata": {"annotations": {objects.DISRUPTION_REASON_ANNOTATION: None,
                                             replacements.REPLACEMENTS_ANNOTATION: None}},
                "spec": {"taints": [t for t in objects.taints(node) if t.get("key") != DISRUPTED_TAINT_KEY]},
            }
            try:
                self.ctx.patch("Node", name, objects.guarded(node, body))
            except ApiError as error:
                log.warning("Could not lift the consolidation taint of node %s: %s", name, error)
                continue
            log.info("Consolidation of node %s called off; removed taint %s", name, DISRUPTED_TAINT_KEY)

    def _recover(self, views: Mapping[str, StateNode]) -> None:
        """Lift our taint from nodes a move left without a replacement record (see the module docstring)."""
        stale = []
        for name, view in views.items():
            if view.deleting or objects.disruption_reason(dict(view.node)) != objects.REASON_CONSOLIDATION:
                continue
            if replacements.recorded(view.node) is not None:
                continue
            live = self.ctx.read_live("Node", name)  # the cache may not show our record yet
            if live is not None and replacements.recorded(live) is None:
                stale.append(name)
        if stale:
            self._lift(stale)


__all__ = ["ConsolidationController", "NodesReplacer", "PendingMove"]
