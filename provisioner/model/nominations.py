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
it and keeps the reserved capacity for the nominated pods. A reservation ends when its pod is
bound (to any node), the pod is deleted, or the deadline passes (:func:`active`).

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

from provisioner.model.quantity import QuantityError, parse_quantity
from provisioner.model.resources import Resources


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


def reserved(nominations: Nominations) -> Resources:
    """What the nominated pods request in total (core units), one ``pods`` slot each.

    A pod's slot is counted once: added when its ``requests`` do not name ``pods`` already.
    """
    return Resources.sum(
        entry.requests if entry.requests.get("pods") else entry.requests + {"pods": 1}
        for entry in nominations.pods.values()
    )


def nominate(
    nominations: Nominations, uid: str, pod: str, requests: Mapping[str, int], deadline: float | None = None
) -> Nominations:
    """A copy with pod ``uid`` (``"<namespace>/<name>"``) added or replaced.

    ``deadline`` (epoch seconds), when given, replaces the current one; otherwise it is kept.
    """
    pods = dict(nominations.pods)
    pods[uid] = NominatedPod(pod=pod, requests=Resources(requests))
    return Nominations(deadline=nominations.deadline if deadline is None else deadline, pods=pods)
