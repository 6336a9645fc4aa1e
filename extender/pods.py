"""What the extender needs to know about the pod being scheduled, read once per request.

Why a thin layer over :mod:`provisioner.scheduling.pods`: the solver's reader is strict (it
raises on anything a *new* node could not satisfy, such as ``matchFields`` in a required node
affinity term, which every DaemonSet pod carries), while the extender must answer every pod
kube-scheduler sends and never fail a scheduling attempt over what it cannot model. So the
sizing and toleration rules come from the solver (one definition of a pod's requests and of
``ToleratesTaint`` for the whole project), and this module only reads the pieces tolerantly:
an unreadable part means "no constraint we can check", and kube-scheduler's own filters still
apply.

Node requirement alternatives follow ``nodeaffinity.GetRequiredNodeAffinity``: ``nodeSelector``
AND any one of the required ``nodeSelectorTerms`` (terms with only ``matchFields`` select a node
by name and constrain nothing we check; an empty term selects no node and is left out).
Preferred node affinity terms are read as the solver reads them
(:func:`provisioner.scheduling.pods.preferred_node_terms`), one at a time: a term that cannot be
read is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.model import labels as wk
from provisioner.model import objects
from provisioner.model.pods import is_daemonset_pod
from provisioner.model.requirements import RequirementError, Requirements
from provisioner.model.resources import Resources
from provisioner.scheduling.pods import (
    Toleration,
    effective_requests,
    empty_node_selector_term,
    preferred_node_terms,
)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The pod as the extender sees it.

    ``requests``: what kube-scheduler charges the pod (core units, ``pods: 1`` included).
    ``alternatives``: node requirements, any one of which a node must meet.
    ``daemonset``: owned by a DaemonSet (node sizing already counts DaemonSet overhead, so
    reservations never keep these pods out). ``preferred``: the preferred node affinity terms
    as ``(weight, requirements)``, heaviest first. ``follows_pods``: the pod has a
    DoNotSchedule topology spread constraint or a required pod affinity term, so kube-scheduler
    may refuse a node for it until other pods are bound (a refusal the binding order lifts).
    """

    uid: str
    key: str  # "<namespace>/<name>"
    requests: Resources
    tolerations: tuple[Toleration, ...]
    alternatives: tuple[Requirements, ...]
    daemonset: bool = False
    preferred: tuple[tuple[int, Requirements], ...] = ()
    follows_pods: bool = False


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    result = []
    for item in _list(spec.get("tolerations")):
        if isinstance(item, Mapping):
            result.append(Toleration(
                key=str(item.get("key") or ""),
                operator=str(item.get("operator") or "Equal"),
                value=str(item.get("value") or ""),
                effect=str(item.get("effect") or ""),
            ))
    return tuple(result)


def _alternatives(spec: Mapping[str, Any]) -> tuple[Requirements, ...]:
    selector = {
        wk.normalize_label_key(str(k)): str(v)
        for k, v in _map(spec.get("nodeSelector")).items()
        if str(k) not in wk.IGNORED_LABELS
    }
    base = Requirements.from_labels(selector)
    required = _map(_map(_map(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    alternatives: list[Requirements] = []
    for term in _list(required.get("nodeSelectorTerms")):
        if empty_node_selector_term(term):
            continue  # selects no node (kube-scheduler's NodeAffinity filter)
        expressions = [
            e for e in _list(_map(term).get("matchExpressions"))
            if isinstance(e, Mapping) and "key" in e and str(e["key"]) not in wk.IGNORED_LABELS
        ]
        try:
            alternatives.append(base & Requirements.from_node_selector_requirements(expressions))
        except (RequirementError, KeyError, TypeError):
            alternatives.append(base)  # an operator we cannot model: kube-scheduler's filter decides
    return tuple(alternatives) or (base,)


def _preferred(spec: Mapping[str, Any]) -> tuple[tuple[int, Requirements], ...]:
    items = _list(_map(_map(spec.get("affinity")).get("nodeAffinity")).get(
        "preferredDuringSchedulingIgnoredDuringExecution"))
    terms: list[tuple[int, Requirements]] = []
    for item in items:
        try:
            terms.extend(preferred_node_terms([item], "preferredDuringSchedulingIgnoredDuringExecution"))
        except (ValueError, TypeError):
            continue  # kube-scheduler's PreScore fails on it: nothing we could score by
    terms.sort(key=lambda wr: -wr[0])
    return tuple(terms)


def _follows_pods(spec: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler's verdict on a node for the pod depends on where other pods are bound.

    A DoNotSchedule topology spread constraint (the skew moves as matching pods are bound) or a
    required pod affinity term (a domain qualifies once a selected pod runs there). Required
    anti-affinity is left out: other pods being bound only ever closes domains to it.
    """
    spread = any(isinstance(c, Mapping) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
                 for c in _list(spec.get("topologySpreadConstraints")))
    affinity = _map(_map(spec.get("affinity")).get("podAffinity"))
    return spread or bool(_list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")))


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """Read a v1.Pod dict into :class:`PodFacts`; never raises on odd content."""
    spec = objects.spec(pod)
    return PodFacts(
        uid=objects.uid(pod) or objects.key(pod),
        key=objects.key(pod),
        requests=effective_requests(pod),  # a quantity kube-apiserver would not admit: one pod slot
        tolerations=_tolerations(spec),
        alternatives=_alternatives(spec),
        daemonset=is_daemonset_pod(pod),
        preferred=_preferred(spec),
        follows_pods=_follows_pods(spec),
    )
