"""Looking up a node's Provisioner (wire form) and its TTL fields, tolerating odd objects."""

from __future__ import annotations

from provisioner.controllers import objects
from provisioner.kube.api import KubeAPI, NotFoundError, Object


def get_provisioner(kube: KubeAPI, node: Object) -> Object | None:
    """The Provisioner named by the node's ``karpenter.sh/provisioner-name`` label, ``None`` if absent."""
    name = objects.provisioner_of(node)
    if name is None:
        return None
    try:
        return kube.get("Provisioner", name)
    except NotFoundError:
        return None


def ttl_seconds(provisioner: Object | None, field: str) -> int | None:
    """``spec.<field>`` as a non-negative int (``ttlSecondsAfterEmpty``, ``ttlSecondsUntilExpired``); ``None`` if unset or invalid."""
    if provisioner is None:
        return None
    value = (provisioner.get("spec") or {}).get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
