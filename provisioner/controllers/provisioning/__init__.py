"""The provisioning controller: just-in-time nodes for pods kube-scheduler cannot place."""

from provisioner.controllers.provisioning.batcher import Batch, Batcher
from provisioner.controllers.provisioning.controller import (
    LaunchedNode,
    ProvisioningController,
    ProvisionResult,
    ReplacementError,
)
from provisioner.controllers.provisioning.selection import not_provisionable_reason

__all__ = [
    "Batch",
    "Batcher",
    "LaunchedNode",
    "ProvisionResult",
    "ProvisioningController",
    "ReplacementError",
    "not_provisionable_reason",
]
