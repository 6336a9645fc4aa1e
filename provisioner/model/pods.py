"""What a pod is, in one place: finished, DaemonSet-owned, static, bound, unschedulable, provisionable.

Every part classifies pods with these predicates over the wire object (the solver input, the
cluster state cache, the lifecycle controllers, the extender, the metrics, ``groupless plan``),
so "terminal" or "DaemonSet pod" means the same everywhere. They never raise: an odd field
reads as absent.

Sources: Karpenter v0.6.3 ``pkg/utils/pod`` (``IsTerminal``, ``IsOwnedByDaemonSet`` and
``IsOwnedByNode``: any owner reference of that kind; a static pod's mirror also carries
``kubernetes.io/config.mirror``) and its selection rules (``pkg/controllers/selection``): a pod
is provisionable when kube-scheduler has already tried and failed (``PodScheduled=False`` with
reason ``Unschedulable``), it is not bound (``spec.nodeName``), kube-scheduler is not preempting
for it (``status.nominatedNodeName``), and it is not owned by a DaemonSet (the DaemonSet
controller places it on every node, new ones included) or a Node (a static/mirror pod). Two
rules of our own: a pod being deleted is not worth a node, and a pod already covered by a
still-valid nomination on a node we launched is waiting for that node, not for another one.

A third, for a backlogged kube-scheduler (:func:`waits_for_first_attempt`): a pod it has not
tried at all (no ``PodScheduled`` condition) for ``untried_grace`` seconds after its creation
counts as unschedulable when the caller passes a grace. kube-scheduler tries a new pod within
milliseconds when it keeps up; when it does not (a burst of 1,000 pods on a loaded API server:
each failed attempt waits for its status PATCH, 100-250 ms, so the first attempt of the last
pod comes minutes later), waiting for its verdict on every pod delays the nodes by that much,
and the pods it reaches after their node is Ready schedule at their first attempt, without a
failed attempt and its PATCH. Only pods for kube-scheduler's default profile (``schedulerName``
absent or ``default-scheduler``), ungated (a gated pod has ``PodScheduled=False`` reason
``SchedulingGated``, so it is not untried), qualify.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from provisioner.model import objects
from provisioner.model.timestamps import timestamp

#: The kubelet's annotation on the mirror of a static pod.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: Phases of a pod that has finished: it holds no resources any more.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def phase(pod: Any) -> str:
    """``status.phase`` (``""`` when not reported yet)."""
    return str(objects.status(pod).get("phase") or "")


def is_terminal(pod: Any) -> bool:
    """Phase Succeeded or Failed: the pod has finished and holds nothing (Karpenter ``IsTerminal``)."""
    return phase(pod) in TERMINAL_PHASES


def is_daemonset_pod(pod: Any) -> bool:
    """A DaemonSet owns the pod (any owner reference): its controller places it, on new nodes too."""
    return "DaemonSet" in objects.owner_kinds(pod)


def is_static_pod(pod: Any) -> bool:
    """A static pod's mirror: owned by its Node, or carrying the kubelet's ``kubernetes.io/config.mirror``."""
    return MIRROR_ANNOTATION in objects.annotations_of(pod) or "Node" in objects.owner_kinds(pod)


def node_name(pod: Any) -> str:
    """``spec.nodeName``: the node the pod is bound to (``""`` while pending)."""
    value = objects.spec(pod).get("nodeName")
    return value if isinstance(value, str) else ""


def is_bound(pod: Any) -> bool:
    """Bound to a node (``spec.nodeName`` set)."""
    return bool(objects.spec(pod).get("nodeName"))


def is_deleting(pod: Any) -> bool:
    """Being deleted (``metadata.deletionTimestamp`` set): terminating, not yet gone."""
    return objects.deleting(pod)


def awaits_capacity(pod: Any | None) -> bool:
    """The pod exists (not None), is not bound and is not being deleted: capacity planned for it is still wanted.

    A nomination ends when this turns False (:func:`provisioner.model.nominations.ended`), and a
    launch none of whose pods still awaits capacity is not made.
    """
    return pod is not None and not is_bound(pod) and not is_deleting(pod)


def is_unschedulable(pod: Any) -> bool:
    """kube-scheduler tried and failed: the ``PodScheduled`` condition is ``False`` with reason ``Unschedulable``."""
    condition = objects.condition(pod, "PodScheduled")
    return condition is not None and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"


#: The scheduler name of kube-scheduler's default profile (``spec.schedulerName`` when unset).
DEFAULT_SCHEDULER = "default-scheduler"


def waits_for_first_attempt(pod: Any, now: float, grace: float) -> bool:
    """kube-scheduler has not tried the pod (no ``PodScheduled`` condition) ``grace`` seconds after its creation.

    ``now``: epoch seconds. False for a pod of another scheduler, one without a readable
    ``creationTimestamp``, and one that is bound.
    """
    if objects.condition(pod, "PodScheduled") is not None or is_bound(pod):
        return False
    if (objects.spec(pod).get("schedulerName") or DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
        return False
    created = objects.created_at(pod)
    return created is not None and now - created >= grace


def bound_since(pod: Any) -> float | None:
    """When the pod was bound: its ``PodScheduled=True`` transition (epoch seconds); None when unknown."""
    condition = objects.condition(pod, "PodScheduled")
    if condition is None or condition.get("status") != "True":
        return None
    return timestamp(condition.get("lastTransitionTime"))


def not_provisionable_reason(
    pod: Any,
    nominated_uids: Collection[str] = (),
    *,
    require_unschedulable: bool = True,
    now: float | None = None,
    untried_grace: float | None = None,
) -> str | None:
    """Why the pod is not provisionable, or None when it is (see the module docstring).

    ``nominated_uids`` are the pods holding a valid nomination on some node.
    ``require_unschedulable=False`` leaves out the one rule that needs kube-scheduler's verdict
    (``groupless plan`` solves manifests kube-scheduler has never seen). With ``now`` (epoch
    seconds) and ``untried_grace`` (seconds), a pod kube-scheduler has not tried that long
    after its creation counts as unschedulable (:func:`waits_for_first_attempt`). Never raises
    on odd objects: anything unreadable is "not provisionable" with a reason.
    """
    if not isinstance(pod, Mapping):
        return "not an object"
    if not all(isinstance(pod.get(part) or {}, Mapping) for part in ("metadata", "spec", "status")):
        return "malformed pod"
    if is_bound(pod):
        return "bound"
    if is_terminal(pod):
        return "terminal"
    if is_deleting(pod):
        return "being deleted"
    if objects.status(pod).get("nominatedNodeName"):
        return "kube-scheduler is preempting for it"
    if is_daemonset_pod(pod):
        return "owned by a DaemonSet"
    if is_static_pod(pod):
        return "owned by a Node"
    if require_unschedulable and not is_unschedulable(pod):
        untried = now is not None and untried_grace is not None and waits_for_first_attempt(pod, now, untried_grace)
        if not untried:
            return "kube-scheduler has not marked it Unschedulable"
    if objects.uid(pod) in nominated_uids:
        return "nominated to an in-flight node"
    return None
