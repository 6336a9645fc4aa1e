"""Snapshot -> solver input: the pods, nodes, DaemonSets, instance types and limit usage of a round.

The Nodes are the snapshot's with the controller's own writes it does not show yet in their
place (:class:`~provisioner.state.inflight.InFlightLedger`); existing and in-flight nodes are
decoded once per (node, pods) resourceVersions and reused across rounds; an in-flight node is
seen as it will be once initialised (startup taints gone); nodes too full for any pod are left
out when no pod counts pods on other nodes; instance types come from the cloud provider with
the offerings that failed for insufficient capacity in this round marked unavailable.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock
from provisioner.cloudprovider.types import CloudProvider, CloudProviderError
from provisioner.controllers.provisioning.events import provisioner_event
from provisioner.controllers.provisioning.rules import (
    _TRANSIENT_TAINTS,
    _capacity,
    _disrupted,
    _key,
    _without_ended_nominations,
)
from provisioner.kube.api import Object
from provisioner.kube.events import EventRecorder
from provisioner.model import labels as wk
from provisioner.model.resources import CPU, MEMORY, PODS, Resources
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.nodes import ClusterNode, node_from_manifest
from provisioner.scheduling.pods import Pod, pod_from_manifest
from provisioner.scheduling.volumes import volume_requirements
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)

_RESOURCE_PARSE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)


class SolverInputs:
    """Builds the parts of a :class:`~provisioner.scheduling.solver.SolverInput` from a snapshot.

    Keeps the decoded-node cache between rounds (so the next burst only pays for changes);
    reads the ledger for the controller's own writes and promised room; records
    ``InstanceTypesUnavailable`` on a Provisioner whose instance types cannot be fetched.
    """

    def __init__(self, clock: Clock, cloud: CloudProvider, ledger: InFlightLedger, recorder: EventRecorder) -> None:
        self.clock = clock
        self.cloud = cloud
        self.ledger = ledger
        self.recorder = recorder
        self._node_cache: dict[str, tuple[tuple[Any, ...], ClusterNode]] = {}

    def nodes(self, snapshot: Snapshot) -> dict[str, Object]:
        """The snapshot's Nodes, with our own writes it does not show yet in their place (or added)."""
        nodes = dict(snapshot.nodes)
        written = self.ledger.written()
        for name, node in written.items():
            cached = nodes.get(name)
            if cached is not None and (cached.get("metadata") or {}).get("deletionTimestamp"):
                continue  # being deleted: newer than anything we wrote, and it must not get pods
            nodes[name] = node
        return nodes

    def usage(self, snapshot: Snapshot) -> dict[str, Resources]:
        """Capacity of each Provisioner's nodes (existing and in flight), against its limits."""
        usage: dict[str, Resources] = {}
        for node in self.nodes(snapshot).values():
            owner = ((node.get("metadata") or {}).get("labels") or {}).get(wk.PROVISIONER_NAME)
            if owner:
                usage[owner] = usage.get(owner, Resources()) + _capacity(node)
        return usage

    def pods(self, snapshot: Snapshot, objects: Sequence[Object], unschedulable: dict[str, str]) -> list[Pod]:
        pods = []
        for obj in objects:
            try:
                volumes = volume_requirements(
                    obj,
                    snapshot.persistent_volume_claims,
                    snapshot.persistent_volumes,
                    snapshot.storage_classes,
                )
                pods.append(pod_from_manifest(obj, volumes))
            except _RESOURCE_PARSE_ERRORS as exc:
                unschedulable[_key(obj)] = f"the pod cannot be read: {exc}"
        return pods

    def instance_types(
        self, provisioners: Mapping[str, Provisioner], snapshot: Snapshot, unavailable: set[tuple[str, str, str]]
    ) -> dict[str, list[InstanceType]]:
        result: dict[str, list[InstanceType]] = {}
        for name, p in provisioners.items():
            try:
                with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="get_instance_types"):
                    types = list(self.cloud.get_instance_types(p))
            except CloudProviderError as exc:
                log.warning("Could not get instance types for Provisioner %s: %s", name, exc)
                provisioner_event(
                    self.recorder, name, snapshot, "Warning", "InstanceTypesUnavailable", str(exc)
                )
                continue
            result[name] = [self.without_unavailable(t, unavailable) for t in types]
        return result

    @staticmethod
    def without_unavailable(it: InstanceType, unavailable: set[tuple[str, str, str]]) -> InstanceType:
        if not unavailable or not any(key[0] == it.name for key in unavailable):
            return it
        offerings = tuple(
            replace(o, available=False) if (it.name, o.zone, o.capacity_type) in unavailable else o
            for o in it.offerings
        )
        return replace(it, offerings=offerings)

    def cluster_nodes(self, snapshot: Snapshot, exclude: frozenset[str]) -> list[ClusterNode]:
        """Existing and in-flight nodes for the solver, cached per (node, pods) resourceVersions.

        Decoding every bound pod of a large cluster costs most of a round, and nearly all nodes
        are unchanged between rounds; a node with nominations is rebuilt each time (its
        reservations end with the clock).
        """
        now = datetime.fromtimestamp(self.clock.now(), tz=UTC)
        nodes = []
        objects = self.nodes(snapshot)
        cache: dict[str, tuple[tuple[Any, ...], ClusterNode]] = {}
        reserved = self.ledger.reserved(objects, snapshot)
        for name, node in objects.items():
            if name in exclude or _disrupted(node):
                continue  # a disrupted node is going away: nothing is placed on it
            pods = snapshot.pods_on(name)
            meta = node.get("metadata") or {}
            key: tuple[Any, ...] | None = None
            if name in reserved:
                key = None  # rebuilt each round while it holds promised room
            elif wk.NOMINATIONS_ANNOTATION not in (meta.get("annotations") or {}):
                key = (
                    meta.get("resourceVersion"),
                    tuple(
                        (
                            (p.get("metadata") or {}).get("uid"),
                            (p.get("metadata") or {}).get("resourceVersion"),
                        )
                        for p in pods
                    ),
                )
            cached = self._node_cache.get(name)
            if key is not None and cached is not None and cached[0] == key:
                cluster_node = cached[1]
            else:
                try:
                    cluster_node = node_from_manifest(
                        _without_ended_nominations(node, snapshot, self.clock.now()),
                        pods, reserved=reserved.get(name, Resources()), now=now,
                    )
                except _RESOURCE_PARSE_ERRORS as exc:
                    log.warning("Ignoring node %s in the solve: %s", name, exc)
                    continue
            if key is not None:
                cache[name] = (key, cluster_node)
            if cluster_node.in_flight and cluster_node.provisioner:
                cluster_node = self.without_startup_taints(cluster_node, snapshot)
            nodes.append(cluster_node)
        self._node_cache = cache
        return nodes

    @staticmethod
    def candidate_nodes(nodes: list[ClusterNode], pods: Sequence[Pod]) -> list[ClusterNode]:
        """Leave out nodes too full for the smallest pod, when no pod counts pods on other nodes.

        A node where none of the pods fits cannot take any of them; it only matters to the
        solver for topology spread and pod (anti-)affinity counting, so it is kept whenever a
        pod has such a constraint. Spares the solver a pods x nodes scan of a full cluster.
        """
        if any(
            p.topology_spread
            or p.pod_affinity
            or p.pod_anti_affinity
            or p.preferred_pod_affinity
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
            if any(
                available.get(name) < value for name, value in smallest.items() if name in node.allocatable
            ):
                continue
            kept.append(node)
        return kept

    @staticmethod
    def without_startup_taints(node: ClusterNode, snapshot: Snapshot) -> ClusterNode:
        """An in-flight node as it will be once initialised: its startup taints gone.

        ``karpenter.sh/not-ready``, the Provisioner's ``startupTaints`` and the node lifecycle
        controller's ``node.kubernetes.io/not-ready``/``unreachable`` only last until the node is
        Ready; a pod that does not tolerate them will still land there (Karpenter's in-flight
        node handling), so the solver must not count them.
        """
        provisioner = snapshot.provisioners.get(node.provisioner or "")
        startup = {(t.key, t.effect) for t in provisioner.spec.startup_taints} if provisioner else set()
        keep = tuple(
            t for t in node.taints if t.key not in _TRANSIENT_TAINTS and (t.key, t.effect) not in startup
        )
        return node if keep == node.taints else replace(node, taints=keep)

    def daemonsets(self, snapshot: Snapshot) -> list[Pod]:
        result = []
        for ds in snapshot.daemonsets:
            try:
                result.append(daemonset_pod(ds))
            except _RESOURCE_PARSE_ERRORS as exc:
                log.warning("Ignoring DaemonSet %s: %s", _key(ds), exc)
        return result
