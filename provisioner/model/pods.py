"""Which pods the provisioning controller acts on, and why the others are left alone.

Karpenter v0.6.3's selection rules (``pkg/controllers/selection``): a pod is provisionable
when kube-scheduler has already tried and failed (``PodScheduled=False`` with reason
``Unschedulable``), it is not bound (``spec.nodeName``), kube-scheduler is not preempting for
it (``status.nominatedNodeName``), and it is not owned by a DaemonSet (the DaemonSet
controller places it on every node, new ones included) or a Node (a static/mirror pod). Two
rules of our own: a pod being deleted is not worth a node, and a pod already covered by a
still-valid nomination on a node we launched is waiting for that node, not for another one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from provisioner.model.objects import controller_owner_kind

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """True when the pod's ``PodScheduled`` condition is ``False`` with reason ``Unschedulable``."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
    return False


def not_provisionable_reason(pod: Mapping[str, Any], nominated_uids: Collection[str] = ()) -> str | None:
    """Why the pod is not provisionable, or None when it is (see the module docstring).

    ``nominated_uids`` are the pods holding a valid nomination on some node. Never raises on
    odd objects: anything unreadable is "not provisionable" with a reason.
    """
    if not isinstance(pod, Mapping):
        return "not an object"
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        return "malformed pod"
    if spec.get("nodeName"):
        return "bound"
    if status.get("phase") in ("Succeeded", "Failed"):
        return "terminal"
    if meta.get("deletionTimestamp"):
        return "being deleted"
    if status.get("nominatedNodeName"):
        return "kube-scheduler is preempting for it"
    kind = controller_owner_kind(pod)
    if kind == "DaemonSet":
        return "owned by a DaemonSet"
    if kind == "Node" or MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "owned by a Node"
    if not is_unschedulable(pod):
        return "kube-scheduler has not marked it Unschedulable"
    if str(meta.get("uid") or "") in nominated_uids:
        return "nominated to an in-flight node"
    return None
