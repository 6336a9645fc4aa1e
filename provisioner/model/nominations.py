"""Nominations: which pending pods a freshly launched node is reserved for.

Why: between the moment the provisioning controller launches a node for some pods and the
moment kube-scheduler binds them, other pending pods could take the new capacity, and the pods
it was launched for would stay Pending and cause yet another launch. Karpenter solves this
in-process (its scheduler "nominates" the node); Groupless runs the scheduler-facing part in an
extender that may live in another process, so the reservation travels on the Node itself:

annotation ``groupless.dev/nominations`` (:data:`provisioner.model.labels.NOMINATIONS_ANNOTATION`)::

    {"deadline": "2026-01-01T00:05:00Z",
     "pods": {"<pod uid>": {"pod": "<namespace>/<name>",
                            "requests": {"cpu": 500, "memory": 1073741824}}}}

``requests`` are integers in the core's units (cpu in milli-CPU, memory and storage in bytes,
everything else a count). The provisioning controller writes and prunes it; the extender reads
it and keeps the reserved capacity for the nominated pods; the solver counts it as used room.

The lifecycle, for every reader (each needs only the pods by UID):

* a reservation **holds room** (:func:`held`) while its pod exists, is not bound (to any node),
  is not being deleted, and the deadline has not passed; :func:`ended` names the pods whose
  state ended it, the deadline aside;
* an entry **may be pruned** from the annotation (:func:`pruned`) once its pod is gone, or has
  been bound for :data:`BIND_GRACE_SECONDS`, or the deadline passed;
* a nominated pod is **displaced** (:func:`displaced`) when the node no longer has room for it
  beside the pods bound there: its nomination ends and it needs capacity again;
* each nominated pod holds one ``pods`` slot (:func:`with_pod_slot`), like a bound one.

The annotation is user-visible and editable, so :func:`decode` never raises: a malformed value
reads as "no reservation" (the safe default: the node is simply unreserved) and the reason is
kept in :attr:`Nominations.error` for a log line or an event. :func:`parse` is the strict form.
This module is pure (no I/O) and belongs to the core.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from provisioner.model import pods as podstate
from provisioner.model.quantity import QuantityError, parse_quantity
from provisioner.model.resources import PODS, Resources


class NominationsError(ValueError):
    """A ``groupless.dev/nominations`` value that cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class NominatedPod:
    """One reservation: the pod (``"<namespace>/<name>"``) and what it requests (core units)."""

    pod: str
    requests: Resources = field(default_factory=Resources)


@dataclass(frozen=True, slots=True)
class Nominations:
    """The reservations on one node.

    ``deadline``: epoch seconds after which every reservation here has ended (0.0 when none).
    ``pods``: pod UID -> :class:`NominatedPod`. ``error``: why the annotation could not be read
    (only set by :func:`decode`; a malformed annotation decodes to no reservation at all).
    """

    deadline: float = 0.0
    pods: Mapping[str, NominatedPod] = field(default_factory=dict, hash=False)
    error: str | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        """True when at least one pod is nominated."""
        return bool(self.pods)

    @property
    def malformed(self) -> bool:
        """True when :func:`decode` had to drop a malformed annotation (see :attr:`error`)."""
        return self.error is not None


EMPTY = Nominations(pods=MappingProxyType({}))


def _format_deadline(epoch_seconds: float) -> str:
    # Kubernetes' timestamp form, whole seconds (metav1.Time), rounded up so a deadline never
    # moves earlier through a round trip.
    whole = int(epoch_seconds) + (1 if epoch_seconds > int(epoch_seconds) else 0)
    return datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_deadline(value: Any) -> float:
    if not isinstance(value, str) or not value.strip():
        raise NominationsError(f"deadline: expected an RFC 3339 timestamp, got {value!r}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as error:
        raise NominationsError(f"deadline: expected an RFC 3339 timestamp, got {value!r}") from error
    if parsed.tzinfo is None:
        raise NominationsError(f"deadline: timestamp {value!r} has no time zone")
    return parsed.timestamp()


def _parse_requests(uid: str, raw: Any) -> Resources:
    if raw is None:
        return Resources()
    if not isinstance(raw, Mapping):
        raise NominationsError(f"pods.{uid}.requests: expected an object, got {raw!r}")
    amounts: dict[str, int] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise NominationsError(f"pods.{uid}.requests.{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            amount = value
        else:  # a hand-edited quantity such as "500m" or "1Gi"
            try:
                amount = parse_quantity(value, str(name))
            except QuantityError as error:
                raise NominationsError(f"pods.{uid}.requests.{name}: {error}") from error
        if amount < 0:
            raise NominationsError(f"pods.{uid}.requests.{name}: negative amount {value!r}")
        amounts[str(name)] = amount
    return Resources(amounts)


def _parse_pod(uid: Any, raw: Any) -> NominatedPod:
    if not isinstance(uid, str) or not uid:
        raise NominationsError(f"pods: expected a pod UID as key, got {uid!r}")
    if not isinstance(raw, Mapping):
        raise NominationsError(f"pods.{uid}: expected an object, got {raw!r}")
    pod = raw.get("pod")
    if not isinstance(pod, str) or pod.count("/") != 1 or pod.startswith("/") or pod.endswith("/"):
        raise NominationsError(f"pods.{uid}.pod: expected \"<namespace>/<name>\", got {pod!r}")
    return NominatedPod(pod=pod, requests=_parse_requests(uid, raw.get("requests")))


def parse(annotation: str) -> Nominations:
    """Strictly read an annotation value; raises :class:`NominationsError` naming the bad field.

    Accepts integer request amounts (the written form) and, for hand-edited values, quantity
    strings (``"500m"``, ``"1Gi"``). Unknown top-level keys are ignored (forward compatible).
    """
    try:
        document = json.loads(annotation)
    except (TypeError, ValueError) as error:
        raise NominationsError(f"not JSON: {error}") from error
    if not isinstance(document, Mapping):
        raise NominationsError(f"expected a JSON object, got {type(document).__name__}")
    deadline = _parse_deadline(document.get("deadline"))
    raw_pods = document.get("pods")
    if raw_pods is None:
        raw_pods = {}
    if not isinstance(raw_pods, Mapping):
        raise NominationsError(f"pods: expected an object of pod UID to reservation, got {raw_pods!r}")
    pods = {uid: _parse_pod(uid, raw) for uid, raw in raw_pods.items()}
    return Nominations(deadline=deadline, pods=pods)


def decode(annotation: str | None) -> Nominations:
    """Read an annotation value tolerantly: never raises.

    ``None`` or ``""`` (no annotation) -> :data:`EMPTY`. A malformed value -> no reservation,
    with :attr:`Nominations.error` saying why (check :attr:`Nominations.malformed`).
    """
    if annotation is None or not annotation.strip():
        return EMPTY
    try:
        return parse(annotation)
    except NominationsError as error:
        return Nominations(error=str(error))
    except (RecursionError, OverflowError, ValueError) as error:  # absurd nesting or numbers
        return Nominations(error=f"unreadable: {type(error).__name__}")


def to_dict(nominations: Nominations) -> dict[str, Any]:
    """The JSON document of :func:`encode` as plain data (pods sorted by UID)."""
    return {
        "deadline": _format_deadline(nominations.deadline),
        "pods": {
            uid: {
                "pod": entry.pod,
                "requests": {name: entry.requests[name] for name in sorted(entry.requests)},
            }
            for uid, entry in sorted(nominations.pods.items())
        },
    }


def encode(nominations: Nominations) -> str:
    """The annotation value: compact JSON, keys sorted, so equal nominations give equal strings.

    The deadline is written in whole seconds (rounded up). ``decode(encode(n))`` equals ``n``
    for a whole-second deadline.
    """
    return json.dumps(to_dict(nominations), sort_keys=True, separators=(",", ":"))


def active(nominations: Nominations, now: float, bound_or_deleted_uids: Collection[str]) -> Nominations:
    """The reservations still in force at ``now`` (epoch seconds).

    Ended: every one once ``now >= deadline``; each pod in ``bound_or_deleted_uids`` (bound to
    any node, or deleted). The deadline is kept; the result has no ``error``.
    """
    if not nominations.pods:
        return nominations if nominations.error is None else Nominations(deadline=nominations.deadline)
    if now >= nominations.deadline:
        return Nominations(deadline=nominations.deadline)
    pods = {uid: entry for uid, entry in nominations.pods.items() if uid not in bound_or_deleted_uids}
    if len(pods) == len(nominations.pods) and nominations.error is None:
        return nominations
    return Nominations(deadline=nominations.deadline, pods=pods)


def with_pod_slot(requests: Resources) -> Resources:
    """``requests`` plus one ``pods`` slot when they name none: what a nominated pod holds on its node.

    kube-scheduler charges every pod one slot of the node's ``pods`` allocatable; the controller
    writes requests with their slot (:func:`provisioner.scheduling.pods.pod_requests`), a
    hand-edited entry may lack it.
    """
    return requests if requests.get(PODS) else requests + {PODS: 1}


def reserved(nominations: Nominations) -> Resources:
    """What the nominated pods request in total (core units), one ``pods`` slot each (:func:`with_pod_slot`)."""
    return Resources.sum(with_pod_slot(entry.requests) for entry in nominations.pods.values())


#: Seconds a nomination outlives its pod's binding. The extender learns of bindings and of
#: nomination changes through two different watches (Pods, Nodes); were a nomination pruned the
#: moment the pod binds, an extender that has seen the pruned annotation but not yet the binding
#: would count the pod nowhere and offer its room to another pod, and the last pods nominated
#: to a node would then not fit on it. While both are visible the extender
#: counts the pod once, as bound (:func:`held` leaves bound pods out).
BIND_GRACE_SECONDS = 30.0

#: Pod UID -> pod object (wire form), e.g. :attr:`provisioner.state.cluster.Snapshot.pods`.
PodsByUID = Mapping[str, Mapping[str, Any]]


def ended(nominations: Nominations, pods: PodsByUID) -> frozenset[str]:
    """UIDs of nominated pods whose reservation their pod's state ended, the deadline aside.

    Ended: the pod is absent from ``pods`` (deleted), bound (to any node), or being deleted.
    """
    gone = set()
    for uid in nominations.pods:
        pod = pods.get(uid)
        if not podstate.awaits_capacity(pod):
            gone.add(uid)
    return frozenset(gone)


def held(nominations: Nominations, pods: PodsByUID, now: float) -> Nominations:
    """The reservations holding room at ``now`` (epoch seconds).

    A reservation holds while its pod exists, is not bound, is not being deleted, and ``now``
    is before the deadline (:func:`ended`, :func:`active`).
    """
    return active(nominations, now, ended(nominations, pods))


def pruned(
    nominations: Nominations, pods: PodsByUID, now: float, bind_grace: float = BIND_GRACE_SECONDS
) -> Nominations:
    """What the annotation keeps at ``now``: entries that may no longer be pruned.

    An entry is pruned once its pod is absent from ``pods``, or has been bound for at least
    ``bind_grace`` seconds (from its ``PodScheduled=True`` transition; a bound pod without one
    at once); every entry once the deadline passed. A pod being deleted keeps its entry until it
    is gone (it holds no room meanwhile: :func:`held`).
    """
    gone = set()
    for uid in nominations.pods:
        pod = pods.get(uid)
        if pod is None:
            gone.add(uid)
        elif podstate.is_bound(pod):
            since = podstate.bound_since(pod)
            if since is None or now - since >= bind_grace:
                gone.add(uid)
    return active(nominations, now, gone)


def displaced(nominations: Nominations, allocatable: Resources, used: Resources) -> frozenset[str]:
    """UIDs of nominated pods that no longer fit on the node beside the pods bound to it.

    Why: the extender holds a node's nominated capacity against the pods it sees bound, but
    kube-scheduler binds asynchronously and places several pods at once from its own cache
    (assumed pods), so under a burst other pods can still take a nominated node's room. The
    nominated pod then fits nowhere, and while its nomination held it was not provisionable:
    nothing launched. A nomination the node can no longer honour therefore ends.

    Nominations are kept in UID order while each (with its ``pods`` slot) fits in
    ``allocatable`` minus ``used`` (what the bound pods request); the rest are displaced. Pass
    the reservations that hold (:func:`held`), so that a bound pod counts once, as bound. A node
    without an allocatable (not registered yet) displaces nothing.
    """
    if not nominations.pods or not allocatable:
        return frozenset()
    free = allocatable - used
    out = set()
    for uid, entry in sorted(nominations.pods.items()):
        wanted = with_pod_slot(entry.requests)
        if wanted.fits(free):
            free = free - wanted
        else:
            out.add(uid)
    return frozenset(out)


def nominate(
    nominations: Nominations, uid: str, pod: str, requests: Mapping[str, int], deadline: float | None = None
) -> Nominations:
    """A copy with pod ``uid`` (``"<namespace>/<name>"``) added or replaced.

    ``deadline`` (epoch seconds), when given, replaces the current one; otherwise it is kept.
    """
    pods = dict(nominations.pods)
    pods[uid] = NominatedPod(pod=pod, requests=Resources(requests))
    return Nominations(deadline=nominations.deadline if deadline is None else deadline, pods=pods)
