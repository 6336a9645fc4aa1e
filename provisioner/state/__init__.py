"""Cluster state: an informer-style cache of the objects the controllers decide on."""

from provisioner.state.cluster import DEFAULT_KINDS, ClusterState, Snapshot

__all__ = ["DEFAULT_KINDS", "ClusterState", "Snapshot"]
