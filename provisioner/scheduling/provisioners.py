"""What a Provisioner means to the solver: its requirements, taints, limits and order.

A Provisioner's nodes carry its labels and ``karpenter.sh/provisioner-name``, and the labels the
controller's settings put on every node it launches (``--node-labels``) on keys the Provisioner
does not name (:func:`provisioner_node_labels`: the one rule the solver's templates, the node
request and the Node object all read), so those act as ``In [v]`` requirements (a pod selecting
on them lands on that Provisioner's nodes). The region labels are dropped (a cluster lives in
one region, v0.6.3). Provisioners are tried by
``weight`` descending, then by name (Karpenter v0.16+; v0.6.3 used the name alone).
``startupTaints`` are not scheduling constraints (they go away once the node is initialised).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from provisioner.api.types import Provisioner
from provisioner.model import labels as wk
from provisioner.model.quantity import parse_resource_list
from provisioner.model.requirements import Requirement, RequirementError, Requirements
from provisioner.model.resources import Resources
from provisioner.model.taints import Taint


def provisioner_node_labels(p: Provisioner, extra: Mapping[str, str]) -> dict[str, str]:
    """The labels every node launched for ``p`` carries, whatever its pods and instance type.

    ``extra`` (the controller's ``nodes.labels`` setting) on the keys ``p``'s requirements and
    labels do not name (a Provisioner is never overridden by a setting), then ``p``'s
    ``labels`` and ``karpenter.sh/provisioner-name``. Keys in ``extra`` are normalised
    (deprecated aliases) as the requirements' are.
    """
    named = {wk.normalize_label_key(r.key) for r in p.spec.requirements} | p.labels_with_name.keys()
    labels = {key: value for key, value in ((wk.normalize_label_key(k), v) for k, v in extra.items())
              if key not in named}
    labels.update(p.labels_with_name)
    return labels


def provisioner_requirements(p: Provisioner, extra: Mapping[str, str] | None = None) -> Requirements:
    """``spec.requirements`` ∩ each of :func:`provisioner_node_labels` as ``In [v]``.

    ``extra``: the controller's labels for every node it launches (none by default). Raises
    ValueError naming the Provisioner for an invalid operator (validation should have refused
    it already).
    """
    try:
        reqs = Requirements(
            Requirement.of(r.key, r.operator, r.values)
            for r in p.spec.requirements
            if r.key not in wk.IGNORED_LABELS
        )
    except RequirementError as error:
        raise ValueError(f"provisioner {p.name}: spec.requirements: {error}") from error
    return reqs & Requirements.from_labels(provisioner_node_labels(p, extra or {}))


def provisioner_taints(p: Provisioner) -> tuple[Taint, ...]:
    """The taints pods must tolerate (``spec.taints``; ``startupTaints`` are excluded)."""
    return tuple(p.spec.taints)


def provisioner_limits(p: Provisioner) -> Resources | None:
    """``spec.limits.resources`` parsed (milli-CPU, bytes, counts); None without limits.

    Raises ValueError naming the Provisioner and resource for a malformed quantity.
    """
    if p.spec.limits is None or not p.spec.limits.resources:
        return None
    return parse_resource_list(dict(p.spec.limits.resources), f"provisioner {p.name}: spec.limits.resources")


def order_provisioners(provisioners: Iterable[Provisioner]) -> list[Provisioner]:
    """Provisioners in the order they are tried: ``weight`` descending (unset = 0), then name."""
    return sorted(provisioners, key=lambda p: (-(p.spec.weight or 0), p.name))
