"""Provisioner deletion: the nodes a Provisioner launched go with it, through the termination path.

Karpenter v0.6.3 left such nodes behind; since v0.12 each Node carries an ownerReference to its
Provisioner, and Kubernetes' garbage collector deletes them. Groupless does both: this controller
adds the ownerReference to any node of ours that lacks it (nodes created before, or by hand),
and deletes itself any node whose Provisioner no longer exists, because the garbage collector
runs in kube-controller-manager, which a cluster may not run (the local control plane), and
because a Provisioner may be recreated under the same name with a new UID. Either way the Node's
termination finalizer cordons, drains and terminates it.

The decision is written first, as the taint ``karpenter.sh/disrupted:NoSchedule`` (with the
annotation ``groupless.dev/disruption-reason: provisioner-deleted``), in one patch conditional
on the resourceVersion read, and only then is the Node deleted. kube-scheduler's own
TaintToleration filter then stops placing pods there at once, extender consulted or not: a
bare pod bound in the moment between the decision and the cordon would otherwise be evicted
and lost (nothing recreates it). Karpenter v1 taints a disruption candidate the same way
before it acts.
"""

from __future__ import annotations

import logging
from typing import Any

from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.provisioners import get_provisioner
from provisioner.controllers.result import Result
from provisioner.kube.api import Object
from provisioner.model.labels import API_VERSION, DISRUPTED_TAINT_KEY, KIND

log = logging.getLogger(__name__)


def owner_reference(provisioner: Object) -> dict[str, Any]:
    """The ownerReference of a node launched by ``provisioner`` (no ``blockOwnerDeletion``)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": objects.name(provisioner),
        "uid": objects.meta(provisioner).get("uid"),
    }


class OwnershipController:
    """``reconcile(node) -> Result``: one patch, or the disrupted taint then a delete, per call."""

    name = "ownership"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reconcile(self, node: Object) -> Result:
        owner_name = objects.provisioner_of(node)
        if owner_name is None or objects.is_deleting(node):
            return Result.done()
        provisioner = get_provisioner(self.ctx, node, live=True)
        name = objects.name(node)
        refs = objects.owner_references(node)
        uid = objects.meta(provisioner).get("uid") if provisioner is not None else None
        stale = any(r.get("kind") == KIND and r.get("name") == owner_name and uid and r.get("uid") != uid for r in refs)
        if provisioner is None or objects.is_deleting(provisioner) or stale:
            why = "was deleted" if provisioner is None or stale else "is being deleted"
            if not objects.has_taint(node, DISRUPTED_TAINT_KEY):
                patch = objects.guarded(node, {
                    "metadata": {"annotations": {
                        objects.DISRUPTION_REASON_ANNOTATION: objects.REASON_PROVISIONER_DELETED}},
                    "spec": {"taints": [*objects.taints(node), {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]},
                })
                self.ctx.patch("Node", name, patch)  # a stale read ends here in a 409: retried, nothing done
                log.info("Tainted node %s %s:NoSchedule: its Provisioner %s %s", name, DISRUPTED_TAINT_KEY,
                         owner_name, why)
            log.info("Deleting node %s: its Provisioner %s %s", name, owner_name, why)
            self.ctx.events.normal(node, "ProvisionerDeleted", f"Provisioner {owner_name} {why}; deleting node")
            self.ctx.delete_node(name)
            return Result.done()
        if not any(r.get("kind") == KIND and r.get("uid") == uid for r in refs):
            patch = objects.guarded(node, {"metadata": {"ownerReferences": [*refs, owner_reference(provisioner)]}})
            self.ctx.patch("Node", name, patch)
        return Result.done()
