"""What may be disrupted now: PodDisruptionBudgets as the disruption controller counts them, and blocking pods.

Pure rules over wire objects (mappings), shared by the fake API's Eviction check
(:mod:`provisioner.kube.fake`) and consolidation's candidate filter
(:mod:`provisioner.state.consolidation`), so both count a budget alike.

* **healthy** pod (:func:`pod_is_healthy`): Running, condition ``Ready=True``, not being
  deleted (kube-controller-manager's disruption controller);
* **disruptions allowed** (:func:`disruptions_allowed`): healthy pods minus the desired healthy
  count: ``minAvailable``, or expected pods minus ``maxUnavailable`` (an int, or a percentage of
  the expected pods rounded up, as apimachinery scales an IntOrString), or every expected pod
  when neither is set (policy/v1);
* a pod **blocks a voluntary disruption** of its node (:func:`eviction_blocker`) when it is
  annotated ``karpenter.sh/do-not-evict: "true"`` or has no controller (a bare pod would not
  come back after its eviction): Karpenter v0.15-v0.31's consolidation rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.model import objects
from provisioner.model.labels import DO_NOT_CONSOLIDATE_ANNOTATION, DO_NOT_EVICT_ANNOTATION


def pod_is_healthy(pod: Mapping[str, Any]) -> bool:
    """Running, condition Ready=True and not being deleted (the disruption controller's "healthy")."""
    if objects.deleting(pod):
        return False
    status = objects.status(pod)
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in objects.conditions(pod))


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """An IntOrString against ``total``: ints as is, ``"25%"`` as a share (apimachinery's rule).

    ValueError for a string that is neither a whole number nor a percentage.
    """
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text.endswith("%"):
        if text.isdigit():
            return int(text)
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    pct = int(text[:-1])
    share = pct * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def budget_status(spec: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
                  expected: int | None = None) -> dict[str, int]:
    """``{currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed}`` of a PDB ``spec`` over the pods it selects.

    ``pods``: the non-terminal pods of the PDB's namespace its selector matches. ``expected``:
    the pods their controllers want (default: as many as ``pods``). Raises ValueError for a
    malformed ``minAvailable``/``maxUnavailable``.
    """
    selected = list(pods)
    healthy = sum(1 for p in selected if pod_is_healthy(p))
    count = len(selected) if expected is None else expected
    if spec.get("maxUnavailable") is not None:
        desired = max(0, count - scaled_value(spec["maxUnavailable"], count, round_up=True))
    elif spec.get("minAvailable") is not None:
        desired = scaled_value(spec["minAvailable"], count, round_up=True)
    else:
        desired = count  # neither field: every expected pod must stay healthy
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": count,
        "disruptionsAllowed": max(0, healthy - desired),
    }


def disruptions_allowed(spec: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> int:
    """How many of ``pods`` (those a PDB selects) may be evicted now (:func:`budget_status`); 0 for a malformed budget."""
    try:
        return budget_status(spec, pods)["disruptionsAllowed"]
    except (ValueError, TypeError):
        return 0


def do_not_evict(pod: Mapping[str, Any]) -> bool:
    """Annotated ``karpenter.sh/do-not-evict: "true"``: its node is not drained voluntarily while it runs."""
    return objects.annotations_of(pod).get(DO_NOT_EVICT_ANNOTATION) == "true"


def do_not_consolidate(node: Mapping[str, Any]) -> bool:
    """A Node annotated ``karpenter.sh/do-not-consolidate: "true"``."""
    return objects.annotations_of(node).get(DO_NOT_CONSOLIDATE_ANNOTATION) == "true"


def eviction_blocker(pod: Mapping[str, Any]) -> str | None:
    """Why ``pod`` keeps its node from a voluntary disruption (do-not-evict, no controller); None when it does not."""
    if do_not_evict(pod):
        return f"pod {objects.key(pod)} has annotation {DO_NOT_EVICT_ANNOTATION}=true"
    if objects.controller_owner(pod) is None:
        return f"pod {objects.key(pod)} has no controller (it would not be recreated)"
    return None
