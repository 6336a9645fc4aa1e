"""Counter: a Provisioner's ``status``: ``resources`` (the sum of its nodes' capacity), ``lastScaleTime``, ``conditions``.

Karpenter v0.6.3's ``counter`` controller: ``spec.limits`` is checked against this sum before
each launch, and users read it with ``kubectl get provisioner -o yaml``. Every resource a
node's ``status.capacity`` reports is summed (cpu, memory, pods, ephemeral-storage, GPUs, ...),
including nodes being deleted (their instances still run).

In the same status patch: ``lastScaleTime``, the creation time of the Provisioner's newest node
(every node is created at its launch), never moved back when nodes go; and the ``Ready``
condition (knative-style, as v0.6.3's ``status.conditions``): ``True`` while the spec decodes,
``False`` with reason ``InvalidSpec`` and the decoder's message when it does not (the
provisioning controller then ignores the Provisioner), ``lastTransitionTime`` moved only when
the status flips. Written on the ``status`` subresource, only when something changed.
"""

from __future__ import annotations

import logging
from typing import Any

from provisioner.api.defaults import default_provisioner
from provisioner.api.schemas import load_provisioner
from provisioner.clock import parse_rfc3339, rfc3339
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.result import Result
from provisioner.kube.api import NotFoundError, Object
from provisioner.model.quantity import QuantityError, format_quantity, parse_quantity

log = logging.getLogger(__name__)


def sum_capacity(nodes: list[Object]) -> dict[str, str]:
    """Sum of ``status.capacity`` over ``nodes``, in wire form (``{"cpu": "8", "memory": "32Gi"}``).

    An unparsable quantity is skipped (logged), never fatal.
    """
    totals: dict[str, int] = {}
    for node in nodes:
        capacity = (node.get("status") or {}).get("capacity")
        if not isinstance(capacity, dict):
            continue
        for resource, raw in capacity.items():
            try:
                amount = parse_quantity(raw, str(resource))
            except QuantityError as error:
                log.warning("Ignoring capacity %s=%r of node %s: %s", resource, raw, objects.name(node), error)
                continue
            totals[str(resource)] = totals.get(str(resource), 0) + amount
    return {name: format_quantity(name, amount) for name, amount in sorted(totals.items())}


def _normalized(resources: Any) -> dict[str, str]:
    if not isinstance(resources, dict):
        return {}
    result = {}
    for name, raw in resources.items():
        try:
            result[str(name)] = format_quantity(str(name), parse_quantity(raw, str(name)))
        except QuantityError:
            result[str(name)] = str(raw)
    return result


#: Longest ``message`` of the Ready condition (the decoder lists every problem).
MAX_MESSAGE_CHARS = 512


def ready_condition(provisioner: Object) -> tuple[str, str | None, str | None]:
    """``(status, reason, message)`` of the Ready condition: ``("True", None, None)`` when the spec decodes.

    Decoding is the cluster state's own (defaults applied, then the marshmallow schemas), so a
    Provisioner shown Ready is one the provisioning controller acts on.
    """
    try:
        load_provisioner(default_provisioner(provisioner))
    except (ValueError, TypeError, KeyError, AttributeError) as error:  # ProvisionerDecodeError is a ValueError
        return "False", "InvalidSpec", " ".join(str(error).split())[:MAX_MESSAGE_CHARS]
    return "True", None, None


def _conditions_patch(status: dict[str, Any], now: float, provisioner: Object) -> list[dict[str, Any]] | None:
    """The whole new ``conditions`` list when Ready must change, else None (other types kept)."""
    raw = status.get("conditions")
    current = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    ready = next((c for c in current if c.get("type") == "Ready"), None)
    state, reason, message = ready_condition(provisioner)
    if ready is not None and (ready.get("status"), ready.get("reason"), ready.get("message")) == (state, reason, message):
        return None
    transition = ready.get("lastTransitionTime") if ready is not None and ready.get("status") == state else None
    condition: dict[str, Any] = {"type": "Ready", "status": state, "lastTransitionTime": transition or rfc3339(now)}
    if reason is not None:
        condition.update(reason=reason, message=message or "")
    return [*(c for c in current if c.get("type") != "Ready"), condition]


def _scale_time(status: dict[str, Any], nodes: list[Object]) -> str | None:
    """The new ``lastScaleTime`` when a node newer than it exists, else None."""
    created = [t for t in map(objects.created_at, nodes) if t is not None]
    if not created:
        return None
    newest = max(created)
    try:
        recorded = parse_rfc3339(str(status["lastScaleTime"])) if status.get("lastScaleTime") else None
    except ValueError:
        recorded = None
    return rfc3339(newest) if recorded is None or int(newest) > int(recorded) else None


class CounterController:
    """``reconcile(provisioner) -> Result``; one status patch at most per call."""

    name = "counter"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reconcile(self, provisioner: Object) -> Result:
        name = objects.name(provisioner)
        if not name:
            return Result.done()
        nodes = self.ctx.nodes(name)
        status = provisioner.get("status")
        status = status if isinstance(status, dict) else {}
        changes: dict[str, Any] = {}
        wanted = sum_capacity(nodes)
        current = status.get("resources")
        if _normalized(current) != wanted:
            resources: dict[str, Any] = dict(wanted)
            if isinstance(current, dict):
                resources.update({k: None for k in current if k not in wanted})
            changes["resources"] = resources
        scaled = _scale_time(status, nodes)
        if scaled is not None:
            changes["lastScaleTime"] = scaled
        conditions = _conditions_patch(status, self.ctx.clock.now(), provisioner)
        if conditions is not None:
            changes["conditions"] = conditions
        if not changes:
            return Result.done()
        try:
            self.ctx.patch("Provisioner", name, {"status": changes}, subresource="status")
        except NotFoundError:
            pass
        return Result.done()
