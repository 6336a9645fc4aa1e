"""Consolidation's view of a snapshot: which nodes are candidates, and the solver input to repack them.

The rules, after Karpenter v0.15-v0.31 (``pkg/controllers/deprovisioning``) with the
settle period of v1's ``consolidateAfter``. A node is a **candidate** when it is:

* managed by a Provisioner with ``spec.consolidation.enabled`` (not being deleted);
* Ready and initialised (no ``karpenter.sh/not-ready``, ephemeral or startup taint left);
* not marked for deletion (being deleted, or tainted ``karpenter.sh/disrupted``) and not
  holding nominations (pods on their way to it), nor launched to replace a node that still
  exists (its pods are on their way: :mod:`provisioner.model.replacements`);
* not annotated ``karpenter.sh/do-not-consolidate: "true"``;
* without a pod that cannot be evicted now: annotated ``karpenter.sh/do-not-evict: "true"``,
  without a controller, or selected by a PodDisruptionBudget that allows no disruption (or by
  more than one: the Eviction API refuses those) (:mod:`provisioner.model.disruption`);
* stable: no pod bound to it or removed from it for the settle period (:class:`Stability`);
* priced (USD/hour known).

And only while its Provisioner is idle: no pod pending that the Provisioner could serve (its
taints tolerated, its requirements compatible with the pod's node selector and a term of its
required node affinity; the well-known labels an instance type fills in need not be named) and
no node of it launching or starting. The pods that move are those that must run elsewhere when the node goes (not
DaemonSet, static, finished or terminating pods), read with their volume topology.

The **base** solver input (:func:`build_solver_input` with no pods) holds every node, the
Provisioners not being deleted with their instance types, the DaemonSets and the limits usage;
:func:`provisioner.scheduling.consolidation.simulate` takes the candidates out of it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.kube.api import Object
from provisioner.kube.selectors import selector_matches
from provisioner.model import objects, replacements
from provisioner.model.disruption import disruptions_allowed, do_not_consolidate, eviction_blocker
from provisioner.model.labels import DO_NOT_CONSOLIDATE_ANNOTATION, WELL_KNOWN_REQUIREMENT_LABELS
from provisioner.model.pods import is_daemonset_pod, is_deleting, is_static_pod, is_terminal
from provisioner.model.requirements import Requirements
from provisioner.model.resources import Resources
from provisioner.scheduling.consolidation import Candidate, utilization
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.pods import pod_from_manifest, tolerates_all
from provisioner.scheduling.provisioners import provisioner_requirements, provisioner_taints
from provisioner.scheduling.solver import SolverInput
from provisioner.state.cluster import Snapshot
from provisioner.state.nodes import StateNode, WireObject
from provisioner.state.solverinput import (
    DECODE_ERRORS,
    active_provisioners,
    build_solver_input,
    provisionable_pods,
    read_pods,
)

#: Why a node is not a candidate, for the reasons that end by themselves.
BEING_DISRUPTED = "being disrupted or deleted"
NOT_SETTLED = "its pods changed within the settle period"
NOT_INITIALIZED = "not Ready and initialized"
NOMINATED = "pods are nominated to it"
#: The reasons that end by themselves within seconds or minutes (no event is sent for them).
TRANSIENT_REASONS = frozenset({BEING_DISRUPTED, NOT_SETTLED, NOT_INITIALIZED, NOMINATED})


@dataclass(frozen=True)
class ConsolidationInput:
    """What one consolidation pass decides over.

    ``base``: the solver input with every node and no pods. ``candidates``: in snapshot order.
    ``unconsolidatable``: node name -> why a node of a consolidating Provisioner is not a
    candidate. ``blocked``: Provisioner name -> why its nodes are not considered now.
    ``nodes``: the nodes of consolidating Provisioners; ``disrupted``: how many of them are
    marked for deletion now.
    """

    base: SolverInput
    candidates: tuple[Candidate, ...] = ()
    unconsolidatable: Mapping[str, str] = field(default_factory=dict)
    blocked: Mapping[str, str] = field(default_factory=dict)
    nodes: int = 0
    disrupted: int = 0


def pod_fingerprint(view: StateNode) -> frozenset[str]:
    """The UIDs of the pods bound to a node (finished ones left out): a change means it is not stable."""
    return frozenset(objects.uid(p) for p in view.pods)


class Stability:
    """Since when each node has had the same pods (epoch seconds), as this process has seen it.

    :meth:`observe` records a node's current pods at ``now``; a node first seen, or whose pods
    changed, is stable from ``now``. Memory only: after a restart every node waits one settle
    period again (a delay, never a wrong move). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, tuple[frozenset[str], float]] = {}

    def observe(self, views: Mapping[str, StateNode], now: float) -> dict[str, float]:
        """Node name -> since when its pods are unchanged; forgets nodes no longer in ``views``."""
        with self._lock:
            kept: dict[str, tuple[frozenset[str], float]] = {}
            for name, view in views.items():
                fingerprint = pod_fingerprint(view)
                previous = self._since.get(name)
                kept[name] = previous if previous is not None and previous[0] == fingerprint else (fingerprint, now)
            self._since = kept
            return {name: since for name, (_, since) in kept.items()}


def _budgets(snapshot: Snapshot) -> list[tuple[str, Mapping[str, object] | None, str, int]]:
    """Each PodDisruptionBudget as (namespace, selector, ``ns/name``, disruptions allowed now)."""
    live = [p for p in snapshot.pods.values() if not is_terminal(p)]
    result = []
    for pdb in snapshot.pdbs:
        namespace = objects.namespace(pdb) or "default"
        spec = objects.spec(pdb)
        selector = spec.get("selector")
        selector = selector if isinstance(selector, Mapping) else None
        selected = [p for p in live if (objects.namespace(p) or "default") == namespace
                    and selector_matches(selector, objects.labels(p))]
        result.append((namespace, selector, objects.key(pdb), disruptions_allowed(spec, selected)))
    return result


def budget_blocker(pod: WireObject, budgets: Sequence[tuple[str, Mapping[str, object] | None, str, int]]) -> str | None:
    """Why a PodDisruptionBudget keeps ``pod`` from being evicted now; None when none does."""
    namespace = objects.namespace(pod) or "default"
    covering = [b for b in budgets if b[0] == namespace and selector_matches(b[1], objects.labels(pod))]
    if len(covering) > 1:
        return f"pod {objects.key(pod)} is selected by {len(covering)} PodDisruptionBudgets (the Eviction API refuses it)"
    if covering and covering[0][3] <= 0:
        return f"PodDisruptionBudget {covering[0][2]} allows no disruption of pod {objects.key(pod)} now"
    return None


def moving_pods(view: StateNode) -> list[Object]:
    """The pods that must run elsewhere if the node goes: not DaemonSet, static, finished or terminating."""
    return [dict(p) for p in view.pods
            if not (is_daemonset_pod(p) or is_static_pod(p) or is_terminal(p) or is_deleting(p))]


def _pending_blocks(snapshot: Snapshot, views: Mapping[str, StateNode], now: float, in_flight: Collection[str],
                    consolidating: Sequence[str]) -> dict[str, str]:
    """Provisioner -> a pending pod it could serve (see the module docstring)."""
    blocked: dict[str, str] = {}
    pending = provisionable_pods(snapshot, views, now, in_flight=in_flight)
    for obj in pending:
        try:
            pod = pod_from_manifest(obj)
        except DECODE_ERRORS:
            for name in consolidating:
                blocked.setdefault(name, f"pod {objects.key(obj)} is pending")
            continue
        for name in consolidating:
            if name in blocked:
                continue
            provisioner = snapshot.provisioners[name]
            try:
                requirements = provisioner_requirements(provisioner)
                terms = pod.required_node_affinity or (Requirements(()),)
                compatible = any(requirements.compatible(pod.base_requirements & term, WELL_KNOWN_REQUIREMENT_LABELS)
                                 is None for term in terms)
            except ValueError:
                compatible = True
            if compatible and tolerates_all(pod.tolerations, provisioner_taints(provisioner)) is None:
                blocked[name] = f"pod {objects.key(obj)} is pending"
    return blocked


def candidate_reason(view: StateNode, now: float, stable_since: float | None, settle_seconds: float,
                     budgets: Sequence[tuple[str, Mapping[str, object] | None, str, int]],
                     pods: Mapping[str, WireObject], replaced: Sequence[str] = ()) -> str | None:
    """Why a node of a consolidating Provisioner is not a candidate now (see the module docstring); None when it is.

    ``replaced``: the existing nodes this node was launched to replace (:mod:`provisioner.model.replacements`).
    """
    if view.marked_for_deletion:
        return BEING_DISRUPTED
    if replaced:
        return f"it replaces node(s) {', '.join(replaced)}, still draining"
    if not view.ready or view.starting:
        return NOT_INITIALIZED
    if do_not_consolidate(view.node):
        return f"annotation {DO_NOT_CONSOLIDATE_ANNOTATION}=true"
    if view.held(pods, now).pods:
        return NOMINATED
    if view.price is None:
        return "its price is unknown"
    for pod in moving_pods(view):
        blocker = eviction_blocker(pod) or budget_blocker(pod, budgets)
        if blocker is not None:
            return blocker
    if stable_since is None or now < stable_since + settle_seconds:
        return NOT_SETTLED
    return None


def consolidation_input(
    snapshot: Snapshot,
    views: Mapping[str, StateNode],
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    now: float,
    stable_since: Mapping[str, float],
    settle_seconds: float,
    in_flight: Collection[str] = (),
    launching: Collection[str] = (),
    reserved: Mapping[str, Resources] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> ConsolidationInput:
    """The candidates, the base solver input and what blocks the rest (see the module docstring).

    ``now``: epoch seconds. ``stable_since``: node name -> since when its pods are unchanged
    (:meth:`Stability.observe`). ``in_flight``: pods the provisioning controller launches for;
    ``launching``: Provisioners with launches running. ``reserved``: node name -> room promised
    there to the pods of nodes being replaced (the in-flight ledger's). ``node_labels``: the
    settings' labels for every launched node.
    """
    active = active_provisioners(snapshot)
    consolidating = sorted(name for name, p in active.items() if p.spec.consolidation_enabled)
    base = build_solver_input(snapshot, views, [], instance_types, now=now, reserved=reserved,
                              node_labels=node_labels).input
    if not consolidating:
        return ConsolidationInput(base)
    blocked = _pending_blocks(snapshot, views, now, in_flight, consolidating)
    for name in launching:
        if name in consolidating:
            blocked.setdefault(name, "a launch is in flight")
    for view in views.values():
        if view.provisioner in consolidating and (view.launching or view.starting):
            blocked.setdefault(view.provisioner, f"node {view.name} is launching")
    budgets = _budgets(snapshot) if snapshot.pdbs else []
    relation = replacements.replaced_by(snapshot.nodes.values())
    candidates: list[Candidate] = []
    unconsolidatable: dict[str, str] = {}
    total = disrupted = 0
    for view in views.values():
        provisioner = view.provisioner
        if provisioner is None or provisioner not in consolidating:
            continue
        total += 1
        disrupted += view.marked_for_deletion
        if provisioner in blocked:
            continue
        reason = candidate_reason(view, now, stable_since.get(view.name), settle_seconds, budgets, snapshot.pods,
                                  relation.get(view.name, ()))
        read = read_pods(snapshot, moving_pods(view)) if reason is None else None
        if read is not None and read.refused:
            reason = f"pod {objects.key(read.refused[0].obj)} cannot be read: {read.refused[0].reason}"
        if reason is not None or read is None:
            unconsolidatable[view.name] = reason or "unknown"
            continue
        candidates.append(Candidate(
            name=view.name,
            provisioner=provisioner,
            price=view.price or 0.0,
            capacity_type=view.capacity_type,
            instance_type=view.instance_type,
            capacity=view.capacity,
            pods=read.pods,
            utilization=utilization(view.requested, view.allocatable),
        ))
    return ConsolidationInput(base, tuple(candidates), unconsolidatable, blocked, total, disrupted)
