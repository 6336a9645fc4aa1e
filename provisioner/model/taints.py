"""Node taints: the value type, the well-known keys, and which taints a launching node will lose.

Sources: Kubernetes' well-known taints (``node.kubernetes.io/*``, set by the node lifecycle
controller and the cloud node manager), Karpenter's ``scheduling.KnownEphemeralTaints`` and
``StateNode.Taints()`` (``pkg/controllers/state/statenode.go``): while a managed node is not
initialised, its ephemeral taints and its Provisioner's ``startupTaints`` are ignored, since they
go away once it is, and a pod that does not tolerate them will still land there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.model import labels as wk


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        result = {"key": self.key, "effect": self.effect}
        if self.value:
            result["value"] = self.value
        return result

    def matches(self, other: Taint) -> bool:
        """Same key and effect (the value aside), as ``corev1.Taint.MatchTaint``."""
        return self.key == other.key and self.effect == other.effect


#: Taints a node loses once it is initialised; ignored on in-flight nodes.
EPHEMERAL_TAINT_KEYS = frozenset({
    wk.NOT_READY_TAINT_KEY, "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
})
#: The taint the node lifecycle controller puts on a cordoned node (``spec.unschedulable``).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


def decode_taints(raw: Any, where: str = "spec.taints") -> tuple[Taint, ...]:
    """Wire taints (``[{key, effect, value?}]``) as values; ValueError naming ``where[i]`` for an entry without both.

    The strict reading: a solver must not guess at a taint it cannot read.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError(f"{where}: expected a list, got {raw!r}")
    result = []
    for i, taint in enumerate(raw):
        if not isinstance(taint, Mapping) or not taint.get("key") or not taint.get("effect"):
            raise ValueError(f"{where}[{i}]: expected {{key, effect}}, got {taint!r}")
        result.append(Taint(str(taint["key"]), str(taint["effect"]), str(taint.get("value") or "")))
    return tuple(result)


def readable_taints(raw: Any) -> tuple[Taint, ...]:
    """Wire taints as values, leaving out entries without a string key (never raises)."""
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(
        Taint(key=t["key"], effect=str(t.get("effect") or ""), value=str(t.get("value") or ""))
        for t in raw
        if isinstance(t, Mapping) and isinstance(t.get("key"), str)
    )


def has_taint(taints: Iterable[Taint], key: str) -> bool:
    """Some taint has ``key``."""
    return any(t.key == key for t in taints)


def is_disrupted(taints: Iterable[Taint]) -> bool:
    """Tainted ``karpenter.sh/disrupted``: the node is going away (expired, empty, Provisioner deleted)."""
    return has_taint(taints, wk.DISRUPTED_TAINT_KEY)


def with_cordon(taints: tuple[Taint, ...], unschedulable: bool) -> tuple[Taint, ...]:
    """``taints`` plus ``node.kubernetes.io/unschedulable:NoSchedule`` for a cordoned node that lacks it.

    The node lifecycle controller taints a node with ``spec.unschedulable`` so, and kube-scheduler
    honours the taint; a solver reading the Node before that must too.
    """
    if not unschedulable or has_taint(taints, UNSCHEDULABLE_TAINT_KEY):
        return taints
    return (*taints, Taint(UNSCHEDULABLE_TAINT_KEY, "NoSchedule"))


def scheduling_taints(
    taints: tuple[Taint, ...], *, initialized: bool, startup_taints: Iterable[Taint] = ()
) -> tuple[Taint, ...]:
    """The taints pods must tolerate to be planned onto a node: Karpenter's ``StateNode.Taints()``.

    While a managed node is not ``initialized``, its ephemeral taints (:data:`EPHEMERAL_TAINT_KEYS`)
    and its Provisioner's ``startup_taints`` (same key and effect) are left out: they go away
    once it is. An initialised node keeps every taint. Returns ``taints`` itself when nothing
    is left out.
    """
    if initialized:
        return taints
    startup = tuple(startup_taints)
    kept = tuple(
        t for t in taints if t.key not in EPHEMERAL_TAINT_KEYS and not any(s.matches(t) for s in startup)
    )
    return taints if len(kept) == len(taints) else kept
