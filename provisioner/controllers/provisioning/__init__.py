"""The provisioning controller: just-in-time nodes for pods kube-scheduler cannot place.

``loop`` (trigger, batch, warm-up, run: :class:`ProvisioningController`), ``provisioner``
(snapshot -> results -> launched and nominated nodes: :class:`NodeProvisioner`), ``launcher``
(instance + Node, rollback, back-off), ``inputs`` (the ledger's knowledge handed to
:func:`provisioner.state.solverinput.build_solver_input`), ``nominations`` (pruning and adding
nominations on our nodes), ``batcher``, ``nodes`` (Node manifests), ``events``; the in-flight
memory is :class:`provisioner.state.inflight.InFlightLedger`. The node, pod and nomination rules
are :mod:`provisioner.model`'s.
"""

from provisioner.controllers.provisioning.batcher import Batch, Batcher
from provisioner.controllers.provisioning.loop import ProvisioningController
from provisioner.controllers.provisioning.provisioner import (
    LaunchedNode,
    NodeProvisioner,
    ProvisionResult,
    ReplacementError,
    replacement_nodes,
)
from provisioner.model.pods import not_provisionable_reason

__all__ = [
    "Batch",
    "Batcher",
    "LaunchedNode",
    "NodeProvisioner",
    "ProvisionResult",
    "ProvisioningController",
    "ReplacementError",
    "not_provisionable_reason",
    "replacement_nodes",
]
