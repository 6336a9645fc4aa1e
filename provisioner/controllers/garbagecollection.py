"""Garbage collection: no instance without a Node, no Node without an instance.

Launching is two steps (CreateFleet, then create the Node object); a crash, a lost leader lease
or an API error between them leaves a running instance that nothing tracks, billed forever.
Conversely an instance terminated behind our back (a spot interruption, a console click) leaves
a Node that will never be Ready again. Karpenter v0.6.3 had neither check; later versions
(``nodeclaim/garbagecollection``) have both. Here, periodically:

* an instance tagged for this cluster (``CloudProvider.list``) with no Node of the same
  instance ID, launched more than ``grace`` seconds ago (5 min), is terminated;
* a Node of ours whose instance is gone (confirmed by ``CloudProvider.get``) is deleted
  through the termination path.

The grace covers the normal gap between launch and Node creation. Before that, adoption
(:mod:`provisioner.controllers.provisioning.adoption`) writes the Node of such an instance from
its tags when a controller starts leading or a launch may have left one, or terminates it at once
when nobody can own it; what reaches the grace here is what adoption could not settle. An
instance whose launch time is unknown is aged from the first time this process saw it.
"""

from __future__ import annotations

import logging

from provisioner.clock import timestamp
from provisioner.cloudprovider.types import CloudProviderError, Machine
from provisioner.cloudprovider.types import NotFoundError as CloudNotFound
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.result import Result

log = logging.getLogger(__name__)


def instance_id_of(provider_id: str) -> str:
    """``aws:///us-west-2a/i-0abc`` -> ``i-0abc`` (the last path segment); ``""`` for ``""``."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


class GarbageCollector:
    """``reconcile() -> Result``: one cluster-wide pass; requeue at the next deadline or ``interval``."""

    name = "garbagecollection"

    def __init__(self, ctx: Context, *, grace: float = 300.0, interval: float = 30.0) -> None:
        self.ctx = ctx
        self.grace = grace
        self.interval = interval
        self._first_seen: dict[str, float] = {}

    def _launched_at(self, machine: Machine, now: float) -> float:
        launched = timestamp(machine.launch_time)
        first_seen = self._first_seen.setdefault(machine.instance_id, now)
        return launched if launched is not None else first_seen

    def reconcile(self) -> Result:
        now = self.ctx.clock.now()
        machines = self.ctx.cloud.list()
        nodes = self.ctx.nodes()
        node_ids = {instance_id_of(objects.provider_id(n)) for n in nodes} - {""}
        next_check = now + self.interval
        for machine in machines:
            if machine.instance_id in node_ids:
                self._first_seen.pop(machine.instance_id, None)
                continue
            deadline = self._launched_at(machine, now) + self.grace
            if now < deadline:
                next_check = min(next_check, deadline)
                continue
            log.info("Garbage collecting instance %s (%s): no node after %ds", machine.instance_id,
                     machine.provider_id, int(now - deadline + self.grace))
            try:
                self.ctx.cloud.delete(machine.provider_id)
            except CloudProviderError as error:
                log.error("Failed to terminate orphan instance %s: %s", machine.instance_id, error)
                continue
            self._first_seen.pop(machine.instance_id, None)
        live = {m.instance_id for m in machines}
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in live}
        for node in nodes:
            provider_id = objects.provider_id(node)
            if (objects.provisioner_of(node) is None or not provider_id or objects.is_deleting(node)
                    or instance_id_of(provider_id) in live):
                continue
            try:
                self.ctx.cloud.get(provider_id)
                continue
            except CloudNotFound:
                pass
            except CloudProviderError as error:
                log.error("Failed to look up instance %s of node %s: %s", provider_id, objects.name(node), error)
                continue
            log.info("Deleting node %s: its instance %s is gone", objects.name(node), provider_id)
            self.ctx.events.warning(node, "InstanceGone", f"Instance {provider_id} no longer exists; deleting node")
            self.ctx.delete_node(objects.name(node))
        return Result.after(max(0.0, next_check - now))
