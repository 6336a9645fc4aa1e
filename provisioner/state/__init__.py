"""Cluster state: an informer-style cache of the objects the controllers decide on, and one view of each node."""

from provisioner.state.cluster import DEFAULT_KINDS, ClusterState, Snapshot, snapshot_of
from provisioner.state.nodes import NodeViews, StateNode

__all__ = ["DEFAULT_KINDS", "ClusterState", "NodeViews", "Snapshot", "StateNode", "snapshot_of"]
