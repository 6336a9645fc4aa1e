"""Rules about nodes, pods and nominations the provisioning controller reads snapshots by.

When a nomination has ended (:func:`_without_ended_nominations`, :data:`BIND_GRACE_SECONDS`,
:func:`_bound_for`), when a node can no longer honour its nominations (:func:`_displaced`),
which pods a node's annotation names (:func:`_nominated_on`), whether a node is going away
(:func:`_disrupted`), a node's capacity (:func:`_capacity`), the taints that only last until a
node is Ready (:data:`_TRANSIENT_TAINTS`), and an object's UID and ``namespace/name`` key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from provisioner.clock import parse_rfc3339
from provisioner.kube.api import Object
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model.quantity import parse_quantity, parse_resource_list
from provisioner.model.resources import PODS, Resources
from provisioner.scheduling.pods import pod_requests
from provisioner.state.cluster import Snapshot

#: Taints that only last until a node is Ready.
_TRANSIENT_TAINTS = frozenset(
    {wk.NOT_READY_TAINT_KEY, "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)


def _without_ended_nominations(node: Object, snapshot: Snapshot, now: float) -> Object:
    """``node`` with only the nominations of pods that exist and are not bound anywhere yet.

    The annotation may still name pods that bound (kept :data:`BIND_GRACE_SECONDS` for the
    extender) or that were deleted since the last prune; the solver must not hold room for them.
    """
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(wk.NOMINATIONS_ANNOTATION)
    if raw is None:
        return node
    decoded = nom.decode(raw)
    ended = {uid for uid in decoded.pods if uid in snapshot.bound_pod_uids or uid not in snapshot.pods}
    live = nom.active(decoded, now, ended)
    if live == decoded:
        return node
    kept = {k: v for k, v in annotations.items() if k != wk.NOMINATIONS_ANNOTATION}
    if live.pods:
        kept[wk.NOMINATIONS_ANNOTATION] = nom.encode(live)
    return {**node, "metadata": {**(node.get("metadata") or {}), "annotations": kept}}


#: Seconds a nomination outlives its pod's binding. The extender learns of bindings and of
#: nomination changes through two different watches (Pods, Nodes); were a nomination pruned the
#: moment the pod binds, an extender that has seen the pruned annotation but not yet the binding
#: would count the pod nowhere and offer its room to another pod, and the last pods nominated
#: to a node would then not fit on it. While both are visible the extender
#: counts the pod once, as bound (``nominations.active`` drops bound UIDs).
BIND_GRACE_SECONDS = 30.0


def _bound_for(pod: Mapping[str, Any], now: float) -> float:
    """Seconds since ``pod`` was bound (its PodScheduled=True transition); infinity when unknown."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            try:
                return now - parse_rfc3339(str(condition.get("lastTransitionTime")))
            except ValueError:
                break
    return float("inf")


def _displaced(node: Mapping[str, Any], nominations: nom.Nominations, bound: Sequence[Object]) -> set[str]:
    """UIDs of nominated pods that no longer fit on ``node`` beside the pods bound to it.

    Why: the extender holds a node's nominated capacity against the pods it sees bound, but
    kube-scheduler binds asynchronously and places several pods at once from its own cache
    (assumed pods), so under a burst other pods can still take a nominated node's room. The
    nominated pod then fits nowhere (``Insufficient memory`` on every node), and while its
    nomination held (``nomination_ttl_seconds``, 5 min) it was not provisionable: nothing
    launched and no cluster event requeued it. A nomination the node can no longer honour
    therefore ends now. Nominations are kept in UID order while they fit in the node's
    allocatable minus what its bound pods request; a node without a readable allocatable
    (not registered yet) displaces nothing.
    """
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity")
    if not nominations.pods or not raw:
        return set()
    try:
        free = Resources(parse_resource_list(raw))
        used = Resources.sum(pod_requests(p) for p in bound)
    except (ValueError, TypeError, AttributeError):
        return set()
    free = free - used
    displaced: set[str] = set()
    for uid, entry in sorted(nominations.pods.items()):
        wanted = entry.requests if entry.requests.get(PODS) else entry.requests + {PODS: 1}
        if wanted.fits(free):
            free = free - wanted
        else:
            displaced.add(uid)
    return displaced


def _nominated_on(node: Mapping[str, Any]) -> Collection[str]:
    """UIDs of the pods in the node's nominations annotation (deadline not considered)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
    return nom.decode(raw).pods if raw else ()


def _disrupted(node: Mapping[str, Any]) -> bool:
    """Whether the node carries ``karpenter.sh/disrupted`` (expiring or emptied: going away)."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(isinstance(t, Mapping) and t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _capacity(node: Mapping[str, Any]) -> Resources:
    status = node.get("status") or {}
    raw = status.get("capacity") or status.get("allocatable") or {}
    values: dict[str, int] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                values[str(name)] = parse_quantity(value, str(name))
            except Exception:  # a malformed quantity counts as nothing, never a crash
                continue
    return Resources(values)
