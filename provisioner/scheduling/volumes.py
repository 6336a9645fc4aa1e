"""Volume topology: where a pod's volumes let it run, as requirements.

An EBS volume lives in one zone, so a pod whose claim is bound to a PersistentVolume can only
run where that PV's ``spec.nodeAffinity`` allows; an unbound claim of a ``WaitForFirstConsumer``
StorageClass will be provisioned where the pod lands, limited by ``allowedTopologies``.
Karpenter (v0.6.3 and today) adds these to the pod's requirements; so do we. Zone aliases
(``topology.ebs.csi.aws.com/zone``) are normalised by the requirements algebra.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.model import objects
from provisioner.model.requirements import IN, Requirement, RequirementError, Requirements

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _first(items: Any) -> Mapping[str, Any] | None:
    """The first entry of a wire list when it is an object; None for an empty or absent list."""
    if not items:
        return None
    if not isinstance(items, list | tuple):
        raise ValueError(f"expected a list, got {items!r}")
    return _map(items[0])


def _first_term(terms: Any) -> Requirements | None:
    try:
        first = _first(terms)
        if first is None:
            return None
        return Requirements.from_node_selector_requirements(first.get("matchExpressions") or ())
    except (RequirementError, KeyError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"nodeSelectorTerms[0].matchExpressions: {error}") from error


def _class_requirements(sc: Mapping[str, Any]) -> Requirements | None:
    if sc.get("volumeBindingMode") != "WaitForFirstConsumer":
        return None  # Immediate binding: the volume is made before scheduling, and binds on its own
    try:
        first = _first(sc.get("allowedTopologies"))
        if first is None:
            return None
        return Requirements(
            Requirement.of(str(e["key"]), IN, [str(v) for v in e.get("values") or ()])
            for e in first.get("matchLabelExpressions") or ()
        )
    except (RequirementError, KeyError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"storageclass {objects.name(sc)}: allowedTopologies[0].matchLabelExpressions: {error}") from error


def volume_requirements(
    pod: Mapping[str, Any],
    pvcs: Iterable[Mapping[str, Any]],
    pvs: Iterable[Mapping[str, Any]],
    storage_classes: Iterable[Mapping[str, Any]],
) -> tuple[Requirements, ...]:
    """Requirements the pod's volumes impose, one per constrained volume (all must hold).

    For each ``persistentVolumeClaim`` (and generic ``ephemeral`` volume) of the pod: a bound
    claim gives the first ``nodeSelectorTerm`` of its PV's ``spec.nodeAffinity.required``; an
    unbound claim gives the first ``allowedTopologies`` term of its StorageClass (the default
    class when none is named) when that class binds ``WaitForFirstConsumer``. Claims not found
    add nothing (kube-scheduler reports them). Raises ValueError for a malformed PV affinity or
    StorageClass topology; other odd fields read as absent.
    """
    namespace = objects.namespace(pod) or "default"
    pod_name = objects.name(pod)
    claims = {(objects.namespace(c) or "default", objects.name(c)): c for c in pvcs}
    volumes = {objects.name(v): v for v in pvs}
    classes = {objects.name(s): s for s in storage_classes}
    default_class = next(
        (s for s in classes.values() if objects.annotations_of(s).get(DEFAULT_CLASS_ANNOTATION) == "true"),
        None,
    )
    result: list[Requirements] = []
    raw_volumes = objects.spec(pod).get("volumes") or ()
    for volume in raw_volumes if isinstance(raw_volumes, list | tuple) else ():
        volume = _map(volume)
        claim_spec: Mapping[str, Any] | None = None
        if volume.get("persistentVolumeClaim"):
            claim = claims.get((namespace, str(_map(volume["persistentVolumeClaim"]).get("claimName") or "")))
            if claim is None:
                continue
            claim_spec = objects.spec(claim)
        elif volume.get("ephemeral"):
            existing = claims.get((namespace, f"{pod_name}-{volume.get('name')}"))
            template = objects.spec(_map(volume["ephemeral"]).get("volumeClaimTemplate"))
            claim_spec = objects.spec(existing) if existing else template
        if claim_spec is None:
            continue
        bound = claim_spec.get("volumeName")
        if bound:
            pv = volumes.get(str(bound))
            if pv is None:
                continue
            required = _map(_map(objects.spec(pv).get("nodeAffinity")).get("required"))
            try:
                reqs = _first_term(required.get("nodeSelectorTerms"))
            except ValueError as error:
                raise ValueError(f"persistentvolume {bound}: spec.nodeAffinity.required.{error}") from error
        else:
            class_name = claim_spec.get("storageClassName")
            sc = classes.get(str(class_name)) if class_name else default_class
            reqs = _class_requirements(sc) if sc is not None else None
        if reqs is not None and len(reqs):
            result.append(reqs)
    return tuple(result)
