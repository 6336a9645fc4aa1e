"""Counter: a Provisioner's ``status.resources`` is the sum of its nodes' capacity.

Karpenter v0.6.3's ``counter`` controller: ``spec.limits`` is checked against this sum before
each launch, and users read it with ``kubectl get provisioner -o yaml``. Every resource a
node's ``status.capacity`` reports is summed (cpu, memory, pods, ephemeral-storage, GPUs, ...),
including nodes being deleted (their instances still run). It is written on the ``status``
subresource, only when it changed.
"""

from __future__ import annotations

import logging
from typing import Any

from provisioner.api.quantity import QuantityError, format_quantity, parse_quantity
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.result import Result
from provisioner.kube.api import NotFoundError, Object

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
        wanted = sum_capacity(nodes)
        current = (provisioner.get("status") or {}).get("resources")
        if _normalized(current) == wanted:
            return Result.done()
        resources: dict[str, Any] = dict(wanted)
        if isinstance(current, dict):
            resources.update({k: None for k in current if k not in wanted})
        try:
            self.ctx.patch("Provisioner", name, {"status": {"resources": resources}}, subresource="status")
        except NotFoundError:
            pass
        return Result.done()
