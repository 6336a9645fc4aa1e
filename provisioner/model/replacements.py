"""Replacements: which nodes were launched to take the pods of a node that is going away.

When a node is disrupted (expired today; consolidated later), replacement capacity is launched
first and the node is drained only once it is Ready (Karpenter v1's disruption orchestration).
The relation is recorded once, on the node being replaced, in the annotation
``groupless.dev/replacements`` (:data:`REPLACEMENTS_ANNOTATION`): a JSON list of the replacement
Node names, e.g. ``["ip-10-0-0-5.ec2.internal"]``. Everything else is derived from it:

* the replaced node's own controller waits for the listed nodes to be Ready, and launches again
  when one is lost;
* a replacement is *not empty* while the node it replaces still exists (even while that node
  drains): the pods it was launched for are still on their way, held back by a
  PodDisruptionBudget or by slow start-up. :func:`replaced_by` inverts the relation for the
  emptiness rule.

The annotation is visible and editable, so :func:`decode` never raises: a malformed value reads
as "nothing recorded". Pure: Node objects are read as plain mappings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REPLACEMENTS_ANNOTATION = "groupless.dev/replacements"


def decode(raw: object) -> tuple[str, ...] | None:
    """The replacement Node names of an annotation value; ``None`` when absent or unreadable."""
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return None
    return tuple(value)


def encode(names: Iterable[str]) -> str:
    """The annotation value for ``names`` (sorted, so a rewrite of the same set is byte-identical)."""
    return json.dumps(sorted(set(names)))


def recorded(node: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The replacements recorded on ``node`` (a v1.Node mapping); ``None`` when none are."""
    metadata = node.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    return decode(annotations.get(REPLACEMENTS_ANNOTATION))


def replaced_by(nodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Replacement Node name -> the names of the existing nodes it replaces (sorted).

    ``nodes`` are every Node of the cluster, those being deleted included: a node that drains
    still exists, and its replacements stay protected until it is gone.
    """
    relation: dict[str, set[str]] = {}
    for node in nodes:
        names = recorded(node)
        if not names:
            continue
        metadata = node.get("metadata")
        old = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(old, str) or not old:
            continue
        for name in names:
            relation.setdefault(name, set()).add(old)
    return {name: tuple(sorted(olds)) for name, olds in relation.items()}


def replaces(node_name: str, nodes: Iterable[Mapping[str, Any]]) -> Sequence[str]:
    """The existing nodes that ``node_name`` was launched to replace (empty when none)."""
    return replaced_by(nodes).get(node_name, ())
