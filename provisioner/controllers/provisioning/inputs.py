"""The provisioning controller's solver input: the ledger's knowledge handed to :mod:`provisioner.state.solverinput`.

The rules (which pods, which nodes as the solver sees them, limits usage) are
:func:`provisioner.state.solverinput.build_solver_input`'s, over the cluster state cache's one
:class:`~provisioner.state.nodes.NodeViews`. This adapter adds what only the controller knows,
from its :class:`~provisioner.state.inflight.InFlightLedger`: the Nodes it wrote that the
snapshot does not show yet (their views take the snapshot's place), the room promised to an
expiring node's pods, and the pods in flight; and the instance types from the cloud provider,
with the offerings that failed for insufficient capacity in this round marked unavailable.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock
from provisioner.cloudprovider.types import CloudProvider, CloudProviderError
from provisioner.controllers.provisioning.events import provisioner_event
from provisioner.kube.api import Object
from provisioner.kube.events import EventRecorder
from provisioner.model import objects
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger
from provisioner.state.nodes import NodeViews, StateNode
from provisioner.state.solverinput import BuiltInput, ReadPods, build_solver_input, merged, provisionable_pods

log = logging.getLogger(__name__)

#: An offering that failed for insufficient capacity: (instance type, zone, capacity type).
OfferingKey = tuple[str, str, str]


class SolverInputs:
    """The controller's solver input, node views and provisionable pods from a snapshot.

    ``views``: the cluster state cache's :attr:`~provisioner.state.cluster.ClusterState.node_views`
    (the one cache of decoded nodes). Reads the ledger for the controller's own writes, promised
    room and pods in flight; records ``InstanceTypesUnavailable`` on a Provisioner whose
    instance types cannot be fetched. ``node_labels``: the settings' labels for every node it
    launches (the solver's templates carry them). ``untried_grace``: seconds after which a pod
    kube-scheduler has not tried yet is provisionable (None: only pods it marked Unschedulable).
    """

    def __init__(self, clock: Clock, cloud: CloudProvider, ledger: InFlightLedger, recorder: EventRecorder,
                 views: NodeViews, node_labels: Mapping[str, str] | None = None,
                 untried_grace: float | None = None) -> None:
        self.clock = clock
        self.untried_grace = untried_grace
        self.node_labels = dict(node_labels or {})
        self.cloud = cloud
        self.ledger = ledger
        self.recorder = recorder
        self.views = views

    def written(self, snapshot: Snapshot, written: Mapping[str, Object] | None = None) -> list[StateNode]:
        """Views of the Nodes the controller wrote that no snapshot has shown yet (``written``: default the ledger's)."""
        result = []
        for node in (self.ledger.written() if written is None else written).values():
            view = self.views.view(node, snapshot)
            if view is not None:
                result.append(view)
        return result

    def nodes(self, snapshot: Snapshot) -> dict[str, StateNode]:
        """The snapshot's node views, with our own writes it does not show yet in their place (or added)."""
        return merged(self.views.nodes(snapshot), self.written(snapshot))

    def node(self, snapshot: Snapshot, name: str) -> StateNode | None:
        """The view of one node as :meth:`nodes` has it, without building the others."""
        current = self.views.nodes(snapshot).get(name)
        written = self.ledger.written().get(name)
        if written is None or (current is not None and current.deleting):  # as merged() decides
            return current
        view = self.views.view(written, snapshot)
        return current if view is None else view

    def warm(self, snapshot: Snapshot) -> None:
        """Decode every node as the solver sees it, so that the next burst only pays for changes.

        A view's :attr:`~provisioner.state.nodes.StateNode.solver_node` (its bound pods read by
        the solver's reader) is built on first use and kept while the node and its pods are unchanged.
        """
        for view in self.views.nodes(snapshot).values():
            _ = view.solver_node

    def provisionable(self, snapshot: Snapshot) -> list[Object]:
        """The snapshot's pending pods to provision for: not in flight, not holding a nomination a node honours."""
        return provisionable_pods(snapshot, self.nodes(snapshot), self.clock.now(), in_flight=self.ledger.in_flight(),
                                  untried_grace=self.untried_grace)

    def build(
        self,
        snapshot: Snapshot,
        pods: Iterable[Object] | ReadPods,
        instance_types: Mapping[str, list[InstanceType]],
        provisioners: Mapping[str, Provisioner],
        exclude: Collection[str],
    ) -> BuiltInput:
        """The solver input of a round; nodes and DaemonSets that cannot be read are logged and left out."""
        writes = self.ledger.writes()  # the Nodes written and the launches still running, counted once
        written = self.written(snapshot, writes.written)
        views = self.views.nodes(snapshot)
        built = build_solver_input(
            snapshot, views, pods if isinstance(pods, ReadPods) else list(pods), instance_types,
            now=self.clock.now(), written=written, launching=writes.launching,
            reserved=self.ledger.reserved(merged(views, written), snapshot), exclude=exclude, provisioners=provisioners,
            node_labels=self.node_labels,
        )
        for refused in built.refused:
            if refused.kind == "Node":
                log.warning("Ignoring node %s in the solve: %s", objects.name(refused.obj), refused.reason)
            elif refused.kind == "DaemonSet":
                log.warning("Ignoring DaemonSet %s: %s", objects.key(refused.obj), refused.reason)
        return built

    def instance_types(
        self, provisioners: Mapping[str, Provisioner], snapshot: Snapshot, unavailable: set[OfferingKey]
    ) -> dict[str, list[InstanceType]]:
        """Per Provisioner, its instance types without the ``unavailable`` offerings; a failed fetch leaves it out."""
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
    def without_unavailable(it: InstanceType, unavailable: set[OfferingKey]) -> InstanceType:
        """``it`` with its offerings in ``unavailable`` marked unavailable."""
        if not unavailable or not any(key[0] == it.name for key in unavailable):
            return it
        offerings = tuple(
            replace(o, available=False) if (it.name, o.zone, o.capacity_type) in unavailable else o
            for o in it.offerings
        )
        return replace(it, offerings=offerings)
