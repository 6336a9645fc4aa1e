"""Looking up a node's Provisioner (wire form) and its TTL fields, tolerating odd objects."""

from __future__ import annotations

from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.kube.api import Object


def get_provisioner(ctx: Context, node: Object, *, live: bool = False) -> Object | None:
    """The Provisioner named by the node's ``karpenter.sh/provisioner-name`` label, ``None`` if absent.

    ``live``: confirm with the API server (before acting on an absence).
    """
    name = objects.provisioner_of(node)
    if name is None:
        return None
    found = ctx.read("Provisioner", name)
    if found is None and live and ctx.reader is not None:
        found = ctx.read_live("Provisioner", name)
    return found


def ttl_seconds(provisioner: Object | None, field: str) -> int | None:
    """``spec.<field>`` as a non-negative int in seconds; ``None`` if unset or invalid.

    ``field``: ``ttlSecondsAfterEmpty`` or ``ttlSecondsUntilExpired``.
    """
    if provisioner is None:
        return None
    value = (provisioner.get("spec") or {}).get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
