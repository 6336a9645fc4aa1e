"""The extender's decisions: pure functions from kube-scheduler's ExtenderArgs and a state view to answers.

Why these rules: kube-scheduler's own filters already check taints, node affinity and fit
against what is *bound* to each node. What it cannot know is what Groupless knows: which nodes
our controllers are about to take away, which Provisioner a node belongs to, and which pending
pods a just-launched node is reserved for (nominations). Without the reservation, pods that
arrive a moment later take the capacity launched for others, and those stay Pending and cause
another launch. The other way round, a pod nominated to a node that is still starting waits
for it: every other node is rejected for it while its nomination holds. Otherwise it would take
room left over elsewhere (on a node launched for other pods of the same burst) while its own
node starts, and that node would turn Ready with nothing to run. The same holds once the node
is up for a pod that kube-scheduler refuses there only until other pods are bound (topology
spread, pod affinity: the binding order decides), while the node has room for it. A node whose Provisioner is
deleted or being deleted is one the ownership controller is about to delete: a bare pod bound
there in the moment before the node is tainted would be evicted and lost, so it is rejected
too. So the filter adds exactly those rules, and the scores steer each pod to the node launched
for it and then pack nodes tightly so that others empty out and ``ttlSecondsAfterEmpty`` can
retire them.

Wire format (k8s.io/kube-scheduler/extender/v1): request ``{"Pod", "Nodes", "NodeNames"}``
with Go field names, decoded case-insensitively as Go does (schedulers before 1.19 sent
lowercase keys). With ``nodeCacheCapable: false`` the request carries ``Nodes`` (a NodeList
without apiVersion/kind) and kube-scheduler reads only ``Nodes.items`` of the answer; with
``true`` it carries ``NodeNames`` and reads ``NodeNames``. We answer in the mode asked.

Reasons never name a node: kube-scheduler counts identical reasons into its FailedScheduling
message ("0/5 nodes are available: 2 node is reserved for nominated pods, ..."). Rejections
that preemption cannot cure (node going away, Provisioner constraints) go to
``FailedAndUnresolvableNodes`` so the scheduler does not evict pods there in vain; the
reservation rule goes to ``FailedNodes`` (evicting a bound pod can make room). A node
rejected because its pod waits for another is unresolvable too.

What the extender does not know never fails a pod: nodes without the
``karpenter.sh/provisioner-name`` label, and nodes not (yet) in our cache, pass, except for a
pod waiting for the node launched for it, which is kept off every other node (the rule is about
the pod, which the extender knows).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from itertools import compress
from operator import not_
from typing import Any

from extender.assumed import AssumedPods
from extender.pods import PodFacts, pod_facts
from extender.state import (
    MARK_CORDONED,
    MARK_DELETING,
    MARK_DISRUPTED,
    MARK_PROVISIONER_DELETED,
    MARK_REASONS,
    ExtenderState,
    ProvisionerInfo,
)
from provisioner.model.resources import CPU, MEMORY
from provisioner.scheduling.extenderscore import MAX_PRIORITY, MIN_PRIORITY, packing, packing_priority
from provisioner.scheduling.pods import node_affinity_score, tolerates_all

log = logging.getLogger("groupless.extender")

REASON_DELETING = MARK_REASONS[MARK_DELETING]
REASON_DISRUPTED = MARK_REASONS[MARK_DISRUPTED]
REASON_CORDONED = MARK_REASONS[MARK_CORDONED]
REASON_PROVISIONER_DELETED = MARK_REASONS[MARK_PROVISIONER_DELETED]
REASON_TAINTS = "node's Provisioner has taints the pod does not tolerate"
REASON_REQUIREMENTS = "node's Provisioner requirements do not match the pod"
REASON_RESERVED = "node is reserved for nominated pods"
REASON_NOT_ITS_NODE = "node is not the one launched for this pod"
#: Appended to every reason when no node passed and the provisioner was signalled.
PROVISIONING_SUFFIX = " (groupless is provisioning a node for this pod)"


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
    names: list[str]  # NodeNames when sent, else the names of Nodes.items
    items: list[Any] | None  # NodeList.items (nodeCacheCapable false), else None
    item_names: list[str]  # the names of Nodes.items, in order (empty without items)
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
    item_names: list[str] = []
    if raw_nodes is not None:
        if not isinstance(raw_nodes, Mapping):
            raise BadRequest(f"Nodes must be a NodeList object, got {type(raw_nodes).__name__}")
        raw_items = _field(raw_nodes, "items")
        if raw_items is None:
            raw_items = []
        if not isinstance(raw_items, list):
            raise BadRequest(f"Nodes.items must be a list, got {type(raw_items).__name__}")
        items = raw_items
        for index, item in enumerate(items):
            metadata = item.get("metadata") if isinstance(item, Mapping) else None
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            if not isinstance(name, str):
                raise BadRequest(f"Nodes.items[{index}]: missing metadata.name")
            item_names.append(name)
    names = item_names
    if raw_names is not None:
        try:  # str.join checks every item is a string, at C speed (5,000 names in ~0.1 ms)
            if not isinstance(raw_names, list):
                raise TypeError
            "".join(raw_names)
        except TypeError:
            raise BadRequest("NodeNames must be a list of strings") from None
        names = raw_names
    return ExtenderArgs(pod=pod, names=names, items=items, item_names=item_names,
                        node_names_mode=raw_names is not None)


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


def reservation_blocks(
    state: ExtenderState, name: str, pod: PodFacts, now: float, assumed: AssumedPods | None = None
) -> bool:
    """True when node ``name`` would fit ``pod`` but for the capacity held for its nominated pods.

    A pod nominated to the node is never blocked there, nor is a DaemonSet pod (nodes are
    sized with DaemonSet overhead, as Karpenter sizes them). Only resources the reservation turns
    from fitting into not fitting count: a pod that does not fit anyway is kube-scheduler's
    call (its NodeResourcesFit filter), not a reservation. ``assumed``: the other pods passed
    to the node and not yet shown bound by the cache (:mod:`extender.assumed`), held too.
    """
    reservation = state.reservation(name, now)
    if reservation is None or pod.daemonset or pod.uid in reservation.uids:
        return False
    left = reservation.left
    if assumed is not None:
        passed = assumed.on(name, now, pod.uid, state.settled)
        if passed:
            left = left - passed
    return pod.requests.short_only_within(reservation.free, left)


def awaited_node(
    state: ExtenderState, pod: PodFacts, names: list[str], rejectable: Mapping[str, tuple[str, bool]], now: float
) -> str | None:
    """The node ``pod`` must be placed on, and no other, or None when it may go anywhere.

    That is the node the pod is nominated to, while the nomination holds at ``now`` (epoch
    seconds: deadline not passed, pod neither bound nor deleted) and the node is neither marked
    nor rejected for the pod by another rule (``rejectable``), when the node is still starting
    (:attr:`NodeInfo.starting`: kube-scheduler's own filters keep pods off it for now), is
    among the candidates ``names`` (the pod can go there now), or is refused by kube-scheduler
    for a reason other pods' binding lifts: the pod follows other pods (:attr:`PodFacts.follows_pods`:
    DoNotSchedule topology spread, required pod affinity) and the node still has room for it.
    The plan counted on the pods of a spread or an affinity being bound in any order (the
    nodes turn Ready one by one); a pod refused its node for now (its zone would run ahead of
    one whose pods are still on their way, or the pod it must be with is not bound yet) is
    retried by kube-scheduler as those pods are bound, and sent elsewhere it would leave its
    node without the pod it was launched for. A nominated node that has started, is not a
    candidate and has no room for the pod (kube-scheduler bound other pods there first), or
    is refused to a pod that follows no pods (a constraint the plan did not foresee), does not
    hold the pod: it may go wherever it fits. When the node is deleted, or the nomination ends
    (at the latest ``nomination_ttl`` after the node turned Ready), the pod is free again.
    """
    node = state.holding_node(pod.uid, now)
    if node is None or node in rejectable:
        return None
    if state.nodes[node].starting or node in names:
        return node
    free = state.reservations[node].free
    if pod.follows_pods and all(wanted <= free.get(resource) for resource, wanted in pod.requests.items()):
        return node
    return None


def _assume(state: ExtenderState, pod: PodFacts, survivors: list[str], now: float, assumed: AssumedPods) -> None:
    """Record ``pod`` on the surviving nodes whose reservation does not name it (:mod:`extender.assumed`)."""
    if not state.nominated:
        return
    reserved = [name for name in survivors if name in state.nominated
                and (r := state.reservation(name, now)) is not None and pod.uid not in r.uids]
    if reserved:
        assumed.passed(pod.uid, pod.requests, reserved, now)


def _summary(failed: Mapping[str, str], unresolvable: Mapping[str, str]) -> str:
    """``2 node is reserved for nominated pods, 1 node is being disrupted``: reasons counted, as kube-scheduler does."""
    counts: dict[str, int] = {}
    for reason in (*failed.values(), *unresolvable.values()):
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))


def _rejectable_nodes(
    state: ExtenderState, pod: PodFacts, now: float, names: Collection[str], assumed: AssumedPods | None = None
) -> dict[str, tuple[str, bool]]:
    """The nodes our rules reject for ``pod``: node name -> (reason, unresolvable).

    Built from the state's indexes (mark verdicts, nodes by Provisioner, nominated nodes), so
    the filter looks each candidate name up once. Marked nodes and nodes of a Provisioner the
    pod violates are listed cluster-wide (dict operations); reservations, which cost a
    computation each, are judged for the candidates ``names`` and the pod's own nominated node
    only (in a burst every node holds nominations). ``now``: epoch seconds (nomination deadlines).
    """
    rejectable: dict[str, tuple[str, bool]] = dict(state.mark_verdicts)
    for provisioner_name, members in state.by_provisioner.items():
        provisioner = state.provisioners.get(provisioner_name)
        reason = provisioner_violation(provisioner, pod) if provisioner is not None else None
        if reason is not None:
            rejectable.update(dict.fromkeys(members, (reason, True)))
    judged = set(names).intersection(state.nominated)
    own = state.nominated_node.get(pod.uid)
    if own is not None:
        judged.add(own)
    for name in judged:
        if name not in rejectable and reservation_blocks(state, name, pod, now, assumed):
            rejectable[name] = (REASON_RESERVED, False)
    return rejectable


def _own_node_note(state: ExtenderState, pod: PodFacts, names: list[str], now: float) -> str:
    """For the "No node left" line: the node ``pod`` is nominated to, when kube-scheduler did not offer it.

    ``""`` when the pod holds no nomination at ``now`` (epoch seconds) or its node was among the
    candidates ``names``.
    """
    node = state.holding_node(pod.uid, now)
    if node is None or node in names:
        return ""
    return f"; its nominated node {node} was not among the {len(names)} candidates"


def _no_node_left(
    pod: PodFacts,
    failed: dict[str, str],
    unresolvable: dict[str, str],
    trigger: Trigger | None,
    note: str = "",
) -> tuple[dict[str, str], dict[str, str]]:
    """Our rules left ``pod`` no node: signal the provisioner, log, and return (failed, unresolvable).

    The trigger is not called for DaemonSet pods. When it returns without error, every reason
    gets :data:`PROVISIONING_SUFFIX`; a failing trigger is logged and the reasons stay as they
    are (the controller's watch still sees the pod). ``note`` ends the log line.
    """
    signalled = False
    if trigger is not None and not pod.daemonset:
        try:
            trigger(pod.uid)
            signalled = True
        except Exception:  # the signal is a fast path; the controller's watch is the real one
            log.exception("Provisioning trigger failed for pod %s", pod.key)
    log.info("No node left for pod %s after Groupless' rules (%s)%s%s", pod.key, _summary(failed, unresolvable),
             note, "; signalled the provisioner" if signalled else "")
    if signalled:
        failed = {k: v + PROVISIONING_SUFFIX for k, v in failed.items()}
        unresolvable = {k: v + PROVISIONING_SUFFIX for k, v in unresolvable.items()}
    return failed, unresolvable


def filter(  # noqa: A001 - the extender verb's name
    args: Mapping[str, Any],
    state: ExtenderState,
    now: float,
    trigger: Trigger | None = None,
    assumed: AssumedPods | None = None,
) -> dict[str, Any]:
    """Answer a filter call: ExtenderArgs dict -> ExtenderFilterResult dict.

    ``now``: epoch seconds (nomination deadlines). ``trigger``: called with the pod UID when
    our rules left no node, so the provisioning controller launches without waiting for its
    watch; the reasons then say so. ``assumed``: the process's record of pods passed into room
    beside a reservation (:mod:`extender.assumed`), read and added to here; None: not kept. A
    pod waiting for the node launched for it
    (:func:`awaited_node`) passes that node only: every other candidate gets
    :data:`REASON_NOT_ITS_NODE` (unresolvable: no eviction elsewhere changes it) unless another
    rule rejects it, and the provisioner is not signalled (the pod's node is on its way).
    Raises :class:`BadRequest` for malformed args.
    """
    request = decode_args(args)
    pod = pod_facts(request.pod)
    names = request.names
    rejectable = _rejectable_nodes(state, pod, now, names, assumed)
    awaited = awaited_node(state, pod, names, rejectable, now)
    if awaited is not None:
        survivors, failed, unresolvable, passes = _verdicts_waiting(names, awaited, rejectable)
    else:
        survivors, failed, unresolvable, passes = _verdicts(names, rejectable)
    if assumed is not None and not pod.daemonset:
        _assume(state, pod, survivors, now, assumed)
    rejected = len(failed) + len(unresolvable)
    if rejected and not survivors and awaited is not None:
        log.debug("Pod %s waits for node %s, launched for it", pod.key, awaited)
    elif rejected and not survivors:
        failed, unresolvable = _no_node_left(pod, failed, unresolvable, trigger, _own_node_note(state, pod, names, now))
    elif rejected and log.isEnabledFor(logging.DEBUG):
        log.debug("Filtered pod %s: %d of %d node(s) rejected (%s)", pod.key, rejected, len(names),
                  _summary(failed, unresolvable))
    result: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }
    if request.items is not None:
        items = request.items
        if passes is not None and names is not request.item_names:
            # both fields sent (no scheduler does): keep the items whose name survived
            kept = set(survivors)
            items = [item for item in items if item["metadata"]["name"] in kept]
        elif passes is not None:
            items = list(compress(items, passes))
        result["Nodes"] = {"metadata": {}, "items": items}
    if request.node_names_mode:
        result["NodeNames"] = survivors
    return result


#: (surviving names, FailedNodes, FailedAndUnresolvableNodes, per name whether it passes or
#: None when every name does). The maps' order depends on the request alone, so the same request
#: gets the same answer, byte for byte.
Verdicts = tuple[list[str], dict[str, str], dict[str, str], list[bool] | None]


def _verdicts(names: list[str], rejectable: Mapping[str, tuple[str, bool]]) -> Verdicts:
    """Each candidate judged by the rules of :func:`_rejectable_nodes`; the rejected ones sorted by name."""
    verdicts = list(map(rejectable.get, names)) if rejectable else []
    if verdicts.count(None) == len(verdicts):
        return names, {}, {}, None
    # C-level passes (compress/filter): a verdict is a non-empty tuple, None when the node passes
    passes = list(map(not_, verdicts))
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    pairs = zip(compress(names, verdicts), builtins.filter(None, verdicts), strict=True)
    for name, (reason, hopeless) in sorted(pairs):
        (unresolvable if hopeless else failed)[name] = reason
    return list(compress(names, passes)), failed, unresolvable, passes


def _verdicts_waiting(names: list[str], awaited: str, rejectable: Mapping[str, tuple[str, bool]]) -> Verdicts:
    """Every candidate but ``awaited`` rejected: by its own rule if one rejects it, else :data:`REASON_NOT_ITS_NODE`.

    In the request's order, with C-level dict and set operations: kube-scheduler may send
    thousands of candidates, and a waiting pod rejects all but one (sorting 5,000 names would
    cost more than the rest of the call).
    """
    unresolvable = dict.fromkeys(names, REASON_NOT_ITS_NODE)
    present = unresolvable.pop(awaited, None) is not None
    failed: dict[str, str] = {}
    for name in rejectable.keys() & unresolvable.keys():
        reason, hopeless = rejectable[name]
        if hopeless:
            unresolvable[name] = reason
        else:
            del unresolvable[name]
            failed[name] = reason
    if not present:
        return [], dict(sorted(failed.items())), unresolvable, [False] * len(names)
    return [awaited], dict(sorted(failed.items())), unresolvable, [name == awaited for name in names]


# ----------------------------------------------------------------------------------- prioritize
def preferred_tier(state: ExtenderState, names: list[str], pod: PodFacts) -> frozenset[str] | None:
    """The candidates ``names`` kube-scheduler's NodeAffinity plugin ranks highest for ``pod``; None: no ranking.

    None when the pod has no preferred node affinity term. Otherwise the nodes of our cache whose
    labels meet the preferred terms with the highest sum of weights
    (:func:`~provisioner.scheduling.pods.node_affinity_score`) among the candidates we know.
    """
    if not pod.preferred:
        return None
    sums: dict[str, int] = {}
    for name in names:
        info = state.nodes.get(name)
        if info is not None:
            sums[name] = node_affinity_score(pod.preferred, info.labels)
    top = max(sums.values(), default=0)
    return frozenset(name for name, total in sums.items() if total == top)


def prioritize(
    args: Mapping[str, Any],
    state: ExtenderState,
    now: float,
    expiry_horizon: float = DEFAULT_EXPIRY_HORIZON,
) -> list[dict[str, Any]]:
    """Answer a prioritize call: ExtenderArgs dict -> HostPriorityList ``[{"Host", "Score"}]``, input order.

    Scores (0..10, kube-scheduler multiplies by ``weight`` × 10):

    - 0: for a pod with preferred node affinity, every candidate outside
      :func:`preferred_tier` (a node whose labels meet terms of a lower total weight than
      another candidate's): the extender never favours a node kube-scheduler's NodeAffinity
      plugin ranks lower; the rules below rank the nodes of the tier;
    - 10: the node this pod is nominated to (the node launched for it);
    - 0: a managed node that ``ttlSecondsUntilExpired`` retires within ``expiry_horizon``
      seconds (or already has), and nodes not in our cache;
    - otherwise ``1 + 2 × packing + cheap`` (1..8): ``packing`` 0..3 is the quarter of
      cpu/memory allocatable in use after placing the pod (reserved capacity counted), so
      fuller nodes win and others empty out (:func:`~provisioner.scheduling.extenderscore.packing_priority`,
      shared with the solver); ``cheap`` is 1 when the pod's share of the node's
      price (USD/h × the larger of its cpu and memory fraction) is within 10% of the cheapest
      such share among the candidates with a known price.

    Deterministic: same args and state give the same list. Raises :class:`BadRequest`.
    """
    request = decode_args(args)
    pod = pod_facts(request.pod)
    nominated_to = state.holding_node(pod.uid, now)
    pod_cpu, pod_memory = pod.requests.get(CPU), pod.requests.get(MEMORY)
    rows, nominated = state.score_rows, state.nominated
    horizon_end = now + expiry_horizon
    preferred = preferred_tier(state, request.names, pod)
    scores: list[int] = []
    shares: list[float | None] = []  # the pod's share of the node's price, USD per hour
    for name in request.names:
        row = rows.get(name)
        if row is None or (preferred is not None and name not in preferred):
            scores.append(MIN_PRIORITY)
            shares.append(None)
            continue
        per_cpu, per_memory, per_resource, used_cpu, used_memory, per_pod, price, expires_at = row
        if name == nominated_to:
            scores.append(MAX_PRIORITY)
            shares.append(None)
            continue
        if expires_at is not None and expires_at <= horizon_end:
            scores.append(MIN_PRIORITY)
            shares.append(None)
            continue
        used_cpu += pod_cpu
        used_memory += pod_memory
        if name in nominated:
            reservation = state.reservation(name, now)
            if reservation is not None:
                used_cpu += reservation.held.get(CPU)
                used_memory += reservation.held.get(MEMORY)
        scores.append(packing_priority(packing(used_cpu, used_memory, per_cpu, per_memory, per_resource)))
        if price is None:
            shares.append(None)
            continue
        taken = max(pod_cpu * per_cpu, pod_memory * per_memory) or per_pod or 1.0
        shares.append(price * taken)
    known = [share for share in shares if share is not None]
    cheap_enough = min(known) * CHEAP_TOLERANCE if known else -1.0
    return [
        {"Host": name, "Score": score + (1 if share is not None and share <= cheap_enough else 0)}
        for name, score, share in zip(request.names, scores, shares, strict=True)
    ]

