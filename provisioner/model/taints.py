"""Taints a launching node carries only until it is initialised.

Karpenter (``pkg/controllers/state/statenode.go``, ``StateNode.Taints``) rejects the well-known
ephemeral taints (``scheduling.KnownEphemeralTaints`` in ``pkg/scheduling/taints.go``) and the
NodePool's startup taints on a managed node that is not initialised yet: they are expected to
go away, so a pod need not tolerate them to be planned onto that node. Startup taints come from
each Provisioner (``spec.startupTaints``); the ephemeral ones are fixed and listed here.
"""

from __future__ import annotations

from provisioner.model.labels import NOT_READY_TAINT_KEY

#: Keys of the taints a node loses once it is initialised, whatever their effect: Karpenter's
#: own not-ready taint (removed by the initialisation controller once the node is Ready), the
#: node lifecycle controller's ``not-ready`` and ``unreachable`` (removed when the kubelet
#: reports Ready) and the cloud controller manager's ``uninitialized`` (removed once it has
#: initialised the node).
EPHEMERAL_TAINT_KEYS = frozenset({
    NOT_READY_TAINT_KEY,
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
})
