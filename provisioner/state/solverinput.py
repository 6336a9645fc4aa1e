"""The solver's input from a snapshot: one builder for the provisioning controller, ``groupless plan`` and benchmarks.

The pure solver (:func:`provisioner.scheduling.solver.solve`) takes values; this module turns a
:class:`~provisioner.state.cluster.Snapshot` and its node views (:mod:`provisioner.state.nodes`)
into them by the provisioning controller's rules:

* **pods to solve**: those :func:`provisioner.model.pods.not_provisionable_reason` accepts, not
  covered by capacity on its way (:func:`provisionable_pods`: in flight, or holding a nomination
  on a node that still has room for it);
* **pods** are read with their volume topology (bound PVs' node affinity, StorageClass
  ``allowedTopologies``); **DaemonSets** become the pods they put on every node, sized with
  their namespace's LimitRange defaults (:func:`daemonset_pods`);
* **existing nodes**: every node but the excluded and the disrupted ones (going away: nothing
  is placed there), as the solver sees them (:attr:`StateNode.solver_node
  <provisioner.state.nodes.StateNode.solver_node>`: the taints a launching node loses hidden),
  with the room their held nominations and any reserved room take counted as requested, and
  the pods nominated there counted among their pods (topology);
  a node whose taints or allocatable cannot be read is left out. When no pod counts pods on
  other nodes (topology spread, pod (anti-)affinity), nodes too full for the smallest pod are
  left out too;
* **limits usage**: the capacity of every node of each Provisioner (existing and in flight),
  plus the room reserved by its launches whose Node is not written yet;
* **Provisioners**: those not being deleted that have instance types.

What only the controller knows comes in as parameters: the Nodes it wrote that the snapshot does
not show yet (``written``), the room its running launches reserve against limits
(``launching``), room promised per node (``reserved``), nodes to treat as unavailable
(``exclude``) and pods it is launching for (``in_flight``). Objects that cannot be read are
left out and listed in :attr:`BuiltInput.refused` (the controller logs them; ``plan`` refuses
its input).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from provisioner.api.types import Provisioner
from provisioner.kube.api import Object
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.pods import not_provisionable_reason
from provisioner.model.resources import CPU, EMPTY, MEMORY, PODS, Resources
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import Pod, pod_from_manifest
from provisioner.scheduling.solver import SolverInput
from provisioner.scheduling.volumes import volume_requirements
from provisioner.state.cluster import Snapshot
from provisioner.state.nodes import StateNode

#: What reading a pod or DaemonSet manifest raises for a field of the wrong shape or value
#: (the readers name the field; ``int()`` and iteration over a mistyped field raise TypeError).
DECODE_ERRORS = (ValueError, TypeError)


@dataclass(frozen=True)
class Refused:
    """An object left out of the input: its kind (``Pod``, ``DaemonSet``, ``Node``), the object, why."""

    kind: str
    obj: Mapping[str, Any]
    reason: str


@dataclass(frozen=True)
class BuiltInput:
    """The solver input and what was left out of it (in the order met)."""

    input: SolverInput
    refused: tuple[Refused, ...] = ()


@dataclass(frozen=True)
class ReadPods:
    """Pods already read for the solver (:func:`read_pods`) and those that could not be read."""

    pods: tuple[Pod, ...]
    refused: tuple[Refused, ...] = ()


def read_pods(snapshot: Snapshot, pods: Iterable[Object]) -> ReadPods:
    """``pods`` (wire objects) as the solver reads them, with their volume topology (bound PVs, StorageClasses).

    A pod whose manifest cannot be read (:data:`DECODE_ERRORS`) is left out and listed as refused.
    """
    refused: list[Refused] = []
    solver_pods: list[Pod] = []
    for obj in pods:
        try:
            volumes = volume_requirements(obj, snapshot.persistent_volume_claims, snapshot.persistent_volumes,
                                          snapshot.storage_classes)
            solver_pods.append(pod_from_manifest(obj, volumes))
        except DECODE_ERRORS as error:
            refused.append(Refused("Pod", obj, str(error)))
    return ReadPods(tuple(solver_pods), tuple(refused))


def merged(views: Mapping[str, StateNode], written: Iterable[StateNode]) -> dict[str, StateNode]:
    """``views`` with ``written`` (views of Nodes this process wrote, newer than the snapshot) in their place.

    A node the snapshot shows being deleted keeps the snapshot's view: its deletion is newer
    than anything written, and it must not get pods.
    """
    result = dict(views)
    for view in written:
        current = result.get(view.name)
        if current is not None and current.deleting:
            continue
        result[view.name] = view
    return result


def active_provisioners(snapshot: Snapshot) -> dict[str, Provisioner]:
    """The snapshot's decoded Provisioners that are not being deleted (name -> Provisioner)."""
    return {
        name: p for name, p in snapshot.provisioners.items()
        if not objects.deleting(snapshot.provisioner_objects.get(name))
    }


def covered_pods(nodes: Mapping[str, StateNode], snapshot: Snapshot, now: float,
                 in_flight: Collection[str] = ()) -> set[str]:
    """UIDs of pods capacity is on its way for: ``in_flight``, or holding a nomination a node still honours.

    A nomination counts while it holds (:func:`provisioner.model.nominations.held`) and the node
    has room for it beside its bound pods (:meth:`StateNode.displaced
    <provisioner.state.nodes.StateNode.displaced>`).
    """
    covered = set(in_flight)
    for view in nodes.values():
        if not view.nominations.pods:
            continue
        held = view.held(snapshot.pods, now)
        covered.update(set(held.pods) - view.displaced(held))
    return covered


def provisionable_pods(
    snapshot: Snapshot,
    nodes: Mapping[str, StateNode],
    now: float,
    *,
    in_flight: Collection[str] = (),
    candidates: Iterable[Object] | None = None,
    require_unschedulable: bool = True,
    untried_grace: float | None = None,
) -> list[Object]:
    """The pods to provision for, in order.

    ``candidates`` (default: the snapshot's pending pods) that
    :func:`~provisioner.model.pods.not_provisionable_reason` accepts, given the pods capacity is
    on its way for (:func:`covered_pods`). ``require_unschedulable=False`` for a dry run;
    ``untried_grace`` (seconds): pods kube-scheduler has not tried that long after their
    creation count as unschedulable (at ``now``, epoch seconds).
    """
    covered = covered_pods(nodes, snapshot, now, in_flight)
    pods = snapshot.pending_pods if candidates is None else candidates
    return [p for p in pods
            if not_provisionable_reason(p, covered, require_unschedulable=require_unschedulable,
                                        now=now, untried_grace=untried_grace) is None]


def daemonset_pods(snapshot: Snapshot) -> tuple[list[Pod], list[Refused]]:
    """The pods the snapshot's DaemonSets put on every node, and the DaemonSets that cannot be read.

    Each template is sized as admission will size its pods: with the LimitRange defaults of
    its namespace (:func:`~provisioner.scheduling.daemonsets.daemonset_pod`), so a DaemonSet
    without requests still reserves room on a new node.
    """
    pods: list[Pod] = []
    refused: list[Refused] = []
    for ds in snapshot.daemonsets:
        try:
            pods.append(daemonset_pod(ds, snapshot.limit_ranges))
        except DECODE_ERRORS as error:
            refused.append(Refused("DaemonSet", ds, str(error)))
    return pods, refused


def provisioner_usage(
    nodes: Mapping[str, StateNode], launching: Mapping[str, Resources] | None = None
) -> dict[str, Resources]:
    """Per Provisioner, what counts against its limits (core units).

    The capacity of its nodes (existing and in flight), plus ``launching``: the room reserved
    by its launches whose Node is not written yet.
    """
    usage: dict[str, Resources] = dict(launching or {})
    for view in nodes.values():
        if view.provisioner:
            usage[view.provisioner] = usage.get(view.provisioner, EMPTY) + view.capacity
    return usage


def cluster_node(view: StateNode, snapshot: Snapshot, now: float, reserved: Resources = EMPTY) -> ClusterNode:
    """The node as the solver sees it: :attr:`StateNode.solver_node` plus held nominations and ``reserved`` room.

    The pods nominated there that still fit (held, not displaced) count among its pods for
    topology spread and pod (anti-)affinity: they will be bound there, and the plan that
    nominated them counted them there (a nominated pod that cannot be read counts by its room
    alone).
    """
    held = view.held(snapshot.pods, now)
    extra = nom.reserved(held) + reserved
    base = view.solver_node
    if not extra:
        return base
    nominated = []
    if held.pods:
        displaced = view.displaced(held)
        for uid in held.pods:
            obj = snapshot.pods.get(uid)
            if obj is None or uid in displaced:
                continue
            try:
                nominated.append(pod_from_manifest(obj))
            except DECODE_ERRORS:
                continue
    return replace(base, requested=base.requested + extra, pods=base.pods + tuple(nominated))


def candidate_nodes(nodes: list[ClusterNode], pods: Sequence[Pod]) -> list[ClusterNode]:
    """Leave out nodes too full for the smallest pod, when no pod counts pods on other nodes.

    A node where none of the pods fits cannot take any of them; it only matters to the
    solver for topology spread and pod (anti-)affinity counting, so it is kept whenever a
    pod has such a constraint. Spares the solver a pods x nodes scan of a full cluster.
    Nodes marked for deletion are left out (they take no pods).
    """
    if any(
        p.topology_spread or p.pod_affinity or p.pod_anti_affinity or p.preferred_pod_affinity
        or p.preferred_pod_anti_affinity
        for p in pods
    ):
        return nodes
    smallest: dict[str, int] = {}
    for pod in pods:
        for name in (CPU, MEMORY, PODS):
            value = pod.requests.get(name)
            smallest[name] = min(smallest.get(name, value), value)
    kept = []
    for node in nodes:
        available = node.available
        if node.marked_for_deletion:
            continue
        if any(available.get(name) < value for name, value in smallest.items() if name in node.allocatable):
            continue
        kept.append(node)
    return kept


def build_solver_input(
    snapshot: Snapshot,
    nodes: Mapping[str, StateNode],
    pods: Sequence[Object] | ReadPods,
    instance_types: Mapping[str, Sequence[InstanceType]],
    *,
    now: float,
    written: Iterable[StateNode] = (),
    launching: Mapping[str, Resources] | None = None,
    reserved: Mapping[str, Resources] | None = None,
    exclude: Collection[str] = (),
    provisioners: Mapping[str, Provisioner] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> BuiltInput:
    """The solver input for ``pods`` over ``snapshot`` and its node views (see the module docstring).

    ``pods``: wire objects, or pods already read (:func:`read_pods`: a caller that needs them
    before the rest of the input, or solves some of them again).

    ``nodes``: :meth:`NodeViews.nodes(snapshot) <provisioner.state.nodes.NodeViews.nodes>`.
    ``instance_types``: per Provisioner name; a Provisioner without an entry is not offered.
    ``now``: epoch seconds (which nominations hold). ``written``, ``launching`` (Provisioner name
    -> room its running launches reserve), ``reserved`` (node name -> room promised there),
    ``exclude`` (node names): the controller's own knowledge.
    ``provisioners``: default :func:`active_provisioners`. ``node_labels``: the labels the
    controller puts on every node it launches (its ``nodes.labels`` setting; none by default).
    """
    read = pods if isinstance(pods, ReadPods) else read_pods(snapshot, pods)
    solver_pods = list(read.pods)
    refused = list(read.refused)
    daemonsets, refused_daemonsets = daemonset_pods(snapshot)
    refused.extend(refused_daemonsets)
    views = merged(nodes, written)
    promised = reserved or {}
    solver_nodes: list[ClusterNode] = []
    for name, view in views.items():
        if name in exclude or view.disrupted:
            continue  # a disrupted node is going away: nothing is placed on it
        problem = view.taint_error or view.allocatable_error
        if problem is not None:
            refused.append(Refused("Node", view.node, problem))
            continue
        solver_nodes.append(cluster_node(view, snapshot, now, promised.get(name, EMPTY)))
    offered = active_provisioners(snapshot) if provisioners is None else provisioners
    return BuiltInput(
        input=SolverInput(
            pods=solver_pods,
            provisioners=[p for name, p in offered.items() if name in instance_types],
            instance_types=instance_types,
            nodes=candidate_nodes(solver_nodes, solver_pods),
            daemonsets=daemonsets,
            provisioner_usage=provisioner_usage(views, launching),
            node_labels=dict(node_labels or {}),
        ),
        refused=tuple(refused),
    )
