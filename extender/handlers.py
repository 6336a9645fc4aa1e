"""The extender's decisions: pure functions from kube-scheduler's ExtenderArgs and a state view to answers.

Why these rules: kube-scheduler's own filters already check taints, node affinity and fit
against what is *bound* to each node. What it cannot know is what Groupless knows: which nodes
our controllers are about to take away, which Provisioner a node belongs to, and which pending
pods a just-launched node is reserved for (nominations). Without the reservation, pods that
arrive a moment later take the capacity launched for others, and those stay Pending and cause
another launch. So the filter adds exactly those rules, and the scores steer each pod to the
node launched for it and then pack nodes tightly so that others empty out and
``ttlSecondsAfterEmpty`` can retire them.

Wire format (k8s.io/kube-scheduler/extender/v1): request ``{"Pod", "Nodes", "NodeNames"}``
with Go field names, decoded case-insensitively as Go does (schedulers before 1.19 sent
lowercase keys). With ``nodeCacheCapable: false`` the request carries ``Nodes`` (a NodeList
without apiVersion/kind) and kube-scheduler reads only ``Nodes.items`` of the answer; with
``true`` it carries ``NodeNames`` and reads ``NodeNames``. We answer in the mode asked.

Reasons never name a node: kube-scheduler counts identical reasons into its FailedScheduling
message ("0/5 nodes are available: 2 node is reserved for nominated pods, ..."). Rejections
that preemption cannot cure (node going away, Provisioner constraints) go to
``FailedAndUnresolvableNodes`` so the scheduler does not evict pods there in vain; the
reservation rule goes to ``FailedNodes`` (evicting a bound pod can make room).

What the extender does not know never fails a pod: nodes without the
``karpenter.sh/provisioner-name`` label, and nodes not (yet) in our cache, pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.pods import PodFacts, pod_facts
from extender.state import MARK_CORDONED, MARK_DELETING, MARK_DISRUPTED, ExtenderState, ProvisionerInfo
from provisioner.api import nominations as nom
from provisioner.scheduling.pods import tolerates_all
from provisioner.scheduling.resources import CPU, MEMORY, PODS, Resources

log = logging.getLogger("groupless.extender")

MIN_PRIORITY = 0
MAX_PRIORITY = 10

REASON_DELETING = "node is being deleted"
REASON_DISRUPTED = "node is being disrupted"
REASON_CORDONED = "node is cordoned for disruption"
REASON_TAINTS = "node's Provisioner has taints the pod does not tolerate"
REASON_REQUIREMENTS = "node's Provisioner requirements do not match the pod"
REASON_RESERVED = "node is reserved for nominated pods"
#: Appended to every reason when no node passed and the provisioner was signalled.
PROVISIONING_SUFFIX = " (groupless is provisioning a node for this pod)"

MARK_REASONS = {MARK_DELETING: REASON_DELETING, MARK_DISRUPTED: REASON_DISRUPTED, MARK_CORDONED: REASON_CORDONED}

#: Nodes that ``ttlSecondsUntilExpired`` retires within this many seconds score lowest.
DEFAULT_EXPIRY_HORIZON = 1800.0

#: A node's price share counts as cheapest when within this factor of the cheapest candidate's.
CHEAP_TOLERANCE = 1.1

#: In-process signal to the provisioning controller: called with the pod's UID.
Trigger = Callable[[str], None]


class BadRequest(ValueError):
    """ExtenderArgs that cannot be served; the message is one line naming the field."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """A decoded request: the pod, the candidate names, and the Node items when sent in full."""

    pod: Mapping[str, Any]
    names: list[str]
    items: list[Any] | None  # NodeList.items (nodeCacheCapable false), else None
    node_names_mode: bool  # NodeNames was sent (nodeCacheCapable true)


def _field(args: Mapping[str, Any], name: str) -> Any:
    """``args[name]`` with Go's case-insensitive key matching (an exact match wins)."""
    if name in args:
        return args[name]
    lowered = name.lower()
    for key, value in args.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def decode_args(args: Any) -> ExtenderArgs:
    """Validate and decode ExtenderArgs; raises :class:`BadRequest` naming the field."""
    if not isinstance(args, Mapping):
        raise BadRequest(f"request body must be a JSON object (ExtenderArgs), got {type(args).__name__}")
    pod = _field(args, "Pod")
    if pod is None:
        raise BadRequest("missing Pod")
    if not isinstance(pod, Mapping):
        raise BadRequest(f"Pod must be an object, got {type(pod).__name__}")
    raw_names = _field(args, "NodeNames")
    raw_nodes = _field(args, "Nodes")
    if raw_names is None and raw_nodes is None:
        raise BadRequest("neither Nodes nor NodeNames given")
    items: list[Any] | None = None
    if raw_nodes is not None:
        if not isinstance(raw_nodes, Mapping):
            raise BadRequest(f"Nodes must be a NodeList object, got {type(raw_nodes).__name__}")
        raw_items = _field(raw_nodes, "items")
        if raw_items is None:
            raw_items = []
        if not isinstance(raw_items, list):
            raise BadRequest(f"Nodes.items must be a list, got {type(raw_items).__name__}")
        items = raw_items
    if raw_names is not None:
        if not isinstance(raw_names, list) or not all(isinstance(n, str) for n in raw_names):
            raise BadRequest("NodeNames must be a list of strings")
        names = raw_names
    else:
        assert items is not None
        names = []
        for index, item in enumerate(items):
            metadata = item.get("metadata") if isinstance(item, Mapping) else None
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            if not isinstance(name, str):
                raise BadRequest(f"Nodes.items[{index}]: missing metadata.name")
            names.append(name)
    return ExtenderArgs(pod=pod, names=names, items=items, node_names_mode=raw_names is not None)


# ------------------------------------------------------------------------------------- filter
def provisioner_violation(provisioner: ProvisionerInfo, pod: PodFacts) -> str | None:
    """The reason ``pod`` cannot run on nodes of ``provisioner``, or None.

    Taints: a NoSchedule/NoExecute taint of the Provisioner the pod does not tolerate
    (``startupTaints`` are left out: they are removed once the node is initialised).
    Requirements: none of the pod's node requirement alternatives intersects the
    Provisioner's requirements (Karpenter's ``Requirements.Intersects``).
    """
    if tolerates_all(pod.tolerations, provisioner.taints) is not None:
        return REASON_TAINTS
    for alternative in pod.alternatives:
        if not alternative.infeasible_keys() and provisioner.requirements.intersects(alternative) is None:
            return None
    return REASON_REQUIREMENTS


def reservation_blocks(state: ExtenderState, name: str, pod: PodFacts, now: float) -> bool:
    """True when node ``name`` would fit ``pod`` but for the capacity held for its nominated pods.

    A pod nominated to the node is never blocked there, nor is a DaemonSet pod (nodes are
    sized with DaemonSet overhead, as Karpenter sizes them). Only resources the reservation turns
    from fitting into not fitting count: a pod that does not fit anyway is kube-scheduler's
    call (its NodeResourcesFit filter), not a reservation.
    """
    info = state.nodes[name]
    active = state.active_nominations(info, now)
    if not active.pods or pod.uid in active.pods or pod.daemonset:
        return False
    free = info.allocatable - info.requested
    held = nom.reserved(active)
    short_with = set(pod.requests.exceeding(free - held))
    return bool(short_with - set(pod.requests.exceeding(free)))


def filter(  # noqa: A001 - the extender verb's name
    args: Mapping[str, Any],
    state: ExtenderState,
    now: float,
    trigger: Trigger | None = None,
) -> dict[str, Any]:
    """Answer a filter call: ExtenderArgs dict -> ExtenderFilterResult dict.

    ``now``: epoch seconds (nomination deadlines). ``trigger``: called with the pod UID when
    our rules left no node, so the provisioning controller launches without waiting for its
    watch; the reasons then say so. Raises :class:`BadRequest` for malformed args.
    """
    request = decode_args(args)
    pod = pod_facts(request.pod)
    names = request.names
    unresolvable: dict[str, str] = {}
    failed: dict[str, str] = {}
    candidates = state.managed.intersection(names)
    if candidates:
        for mark, members in state.marked.items():
            hit = candidates & members
            if hit:
                unresolvable.update(dict.fromkeys(hit, MARK_REASONS.get(mark, REASON_DELETING)))
        for provisioner_name, members in state.by_provisioner.items():
            hit = candidates & members
            if not hit:
                continue
            provisioner = state.provisioners.get(provisioner_name)
            reason = provisioner_violation(provisioner, pod) if provisioner is not None else None
            if reason is not None:
                unresolvable.update(dict.fromkeys(hit, reason))
        for name in sorted((candidates & state.nominated).difference(unresolvable)):
            if reservation_blocks(state, name, pod, now):
                failed[name] = REASON_RESERVED
    rejected = len(failed) + len(unresolvable)
    survivors = names
    if rejected:  # one pass in request order: the survivors, and both maps in request order
        survivors = []
        ordered_failed: dict[str, str] = {}
        ordered_unresolvable: dict[str, str] = {}
        for name in names:
            if name in unresolvable:
                ordered_unresolvable[name] = unresolvable[name]
            elif name in failed:
                ordered_failed[name] = failed[name]
            else:
                survivors.append(name)
        failed, unresolvable = ordered_failed, ordered_unresolvable
    if rejected and not survivors and trigger is not None and not pod.daemonset:
        try:
            trigger(pod.uid)
        except Exception:  # the signal is a fast path; the controller's watch is the real one
            log.exception("Provisioning trigger failed for pod %s", pod.key)
        else:
            failed = {k: v + PROVISIONING_SUFFIX for k, v in failed.items()}
            unresolvable = {k: v + PROVISIONING_SUFFIX for k, v in unresolvable.items()}
    result: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }
    if request.items is not None:
        items = request.items
        if rejected:
            items = [i for i, n in zip(items, names, strict=True) if n not in failed and n not in unresolvable]
        result["Nodes"] = {"metadata": {}, "items": items}
    if request.node_names_mode:
        result["NodeNames"] = survivors
    return result


# ----------------------------------------------------------------------------------- prioritize
def _utilisation(used: Resources, allocatable: Resources) -> float:
    shares = [min(1.0, max(0.0, used.get(r) / allocatable.get(r))) for r in (CPU, MEMORY) if allocatable.get(r) > 0]
    return sum(shares) / len(shares) if shares else 0.0


def _share(price: float, pod: Resources, allocatable: Resources) -> float:
    """USD per hour of the node's price that the pod's requests take (the larger of cpu and memory)."""
    fractions = [pod.get(r) / allocatable.get(r) for r in (CPU, MEMORY) if allocatable.get(r) > 0]
    if not any(fractions) and allocatable.get(PODS) > 0:
        fractions = [1 / allocatable.get(PODS)]
    return price * max(fractions, default=1.0)


def prioritize(
    args: Mapping[str, Any],
    state: ExtenderState,
    now: float,
    expiry_horizon: float = DEFAULT_EXPIRY_HORIZON,
) -> list[dict[str, Any]]:
    """Answer a prioritize call: ExtenderArgs dict -> HostPriorityList ``[{"Host", "Score"}]``, input order.

    Scores (0..10, kube-scheduler multiplies by ``weight`` × 10):

    - 10: the node this pod is nominated to (the node launched for it);
    - 0: a managed node that ``ttlSecondsUntilExpired`` retires within ``expiry_horizon``
      seconds (or already has), and nodes not in our cache;
    - otherwise ``1 + 2 × packing + cheap`` (1..8): ``packing`` 0..3 is the quarter of
      cpu/memory allocatable in use after placing the pod (reserved capacity counted), so
      fuller nodes win and others empty out; ``cheap`` is 1 when the pod's share of the node's
      price (USD/h × the larger of its cpu and memory fraction) is within 10% of the cheapest
      such share among the candidates with a known price.

    Deterministic: same args and state give the same list. Raises :class:`BadRequest`.
    """
    request = decode_args(args)
    pod = pod_facts(request.pod)
    nominated_to = state.nominated_node.get(pod.uid)
    if nominated_to is not None and pod.uid not in state.active_nominations(state.nodes[nominated_to], now).pods:
        nominated_to = None
    fixed: dict[str, int] = {}  # host -> score decided without comparing with the others
    ranked: list[tuple[str, int, float | None]] = []  # (host, packing tier, price share)
    for name in request.names:
        info = state.nodes.get(name)
        if info is None:
            fixed[name] = MIN_PRIORITY
        elif name == nominated_to:
            fixed[name] = MAX_PRIORITY
        elif info.provisioner is not None and info.expires_at is not None and info.expires_at - now <= expiry_horizon:
            fixed[name] = MIN_PRIORITY
        else:
            used = info.requested + pod.requests
            if name in state.nominated:
                used = used + nom.reserved(state.active_nominations(info, now))
            tier = min(3, int(_utilisation(used, info.allocatable) * 4))
            share = _share(info.price, pod.requests, info.allocatable) if info.price is not None else None
            ranked.append((name, tier, share))
    known = [share for _, _, share in ranked if share is not None]
    cheap_enough = min(known) * CHEAP_TOLERANCE if known else 0.0
    for name, tier, share in ranked:
        fixed[name] = 1 + 2 * tier + (1 if share is not None and share <= cheap_enough else 0)
    result = [{"Host": name, "Score": fixed[name]} for name in request.names]
    return result


def names_of(args: Mapping[str, Any]) -> Sequence[str]:
    """Candidate node names of a request (for logs and metrics); raises :class:`BadRequest`."""
    return decode_args(args).names
