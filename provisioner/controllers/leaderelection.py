"""Leader election with a ``coordination.k8s.io/v1`` Lease, so two replicas never act at once.

The algorithm is client-go's ``leaderelection`` package (resourcelock ``leases``):

* the Lease records ``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``,
  ``renewTime`` and ``leaseTransitions``;
* a candidate takes the Lease when it does not exist, when its holder is empty (released), or
  when its record has not changed for ``lease_duration`` seconds *as observed on the
  candidate's own clock* (so clock skew between machines does not matter);
* every write is a PUT carrying the resourceVersion read, so of two candidates racing for an
  expired Lease exactly one wins (the other gets 409 Conflict);
* the leader renews every ``retry_period``; if it cannot renew for ``renew_deadline`` it stops
  leading (the process then exits, as Karpenter's does, so a fresh start re-syncs state);
* on a clean shutdown the leader releases the Lease (empty holder) so a successor starts at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from provisioner.clock import Clock
from provisioner.kube.api import ApiError, KubeAPI, NotFoundError, Object

log = logging.getLogger(__name__)


def micro_time(epoch_seconds: float) -> str:
    """``metav1.MicroTime`` wire form: ``2026-01-01T00:00:00.000000Z``."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and renews one Lease as ``identity``.

    ``lease_duration`` > ``renew_deadline`` > ``retry_period`` (seconds), as client-go requires;
    ValueError otherwise.
    """

    def __init__(
        self,
        kube: KubeAPI,
        clock: Clock,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                f"leader election needs lease_duration ({lease_duration}) > renew_deadline "
                f"({renew_deadline}) > retry_period ({retry_period}) > 0"
            )
        self.kube = kube
        self.clock = clock
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        self.is_leader = False

    def _spec(self, lease: Object) -> dict[str, Any]:
        spec = lease.get("spec")
        return spec if isinstance(spec, dict) else {}

    def _new_spec(self, previous: dict[str, Any], now: float) -> dict[str, Any]:
        same_holder = previous.get("holderIdentity") == self.identity
        transitions = int(previous.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(round(self.lease_duration))),
            "acquireTime": previous.get("acquireTime") if same_holder and previous.get("acquireTime") else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions if same_holder or not previous.get("holderIdentity") else transitions + 1,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt: True when this identity holds the Lease afterwards. Never raises ApiError."""
        now = self.clock.monotonic()
        wall = self.clock.now()
        try:
            lease = self.kube.get("Lease", self.name, self.namespace)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._new_spec({}, wall),
            }
            try:
                self.kube.create("Lease", body)
            except ApiError as error:
                log.info("Failed to create lease %s/%s: %s", self.namespace, self.name, error)
                return self._lost()
            return self._won(now)
        except ApiError as error:
            log.warning("Failed to read lease %s/%s: %s", self.namespace, self.name, error)
            return self._lost()
        spec = self._spec(lease)
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return self._lost()
        updated = dict(lease)
        updated["spec"] = {**spec, **self._new_spec(spec, wall)}
        try:
            self.kube.replace("Lease", updated)
        except ApiError as error:
            log.info("Failed to update lease %s/%s: %s", self.namespace, self.name, error)
            return self._lost()
        if holder != self.identity:
            log.info("Acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
        return self._won(now)

    def _won(self, now: float) -> bool:
        self.is_leader = True
        self._last_renew = now
        return True

    def _lost(self) -> bool:
        if self.is_leader and self.clock.monotonic() - self._last_renew < self.renew_deadline:
            return False  # still within the renew deadline: keep leading, retry soon
        self.is_leader = False
        return False

    def release(self) -> None:
        """Give the Lease up (empty holder) if this identity holds it."""
        try:
            lease = self.kube.get("Lease", self.name, self.namespace)
        except ApiError:
            return
        spec = self._spec(lease)
        if spec.get("holderIdentity") != self.identity:
            return
        updated = dict(lease)
        updated["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                           "renewTime": micro_time(self.clock.now())}
        try:
            self.kube.replace("Lease", updated)
            log.info("Released lease %s/%s", self.namespace, self.name)
        except ApiError as error:
            log.warning("Failed to release lease %s/%s: %s", self.namespace, self.name, error)
        self.is_leader = False

    def run(self, stop: threading.Event, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Block: acquire, call ``on_started``, renew until ``stop`` or a missed renew deadline, then ``on_stopped``.

        Releases the Lease when ``stop`` is set while leading.
        """
        while not stop.is_set():
            if self.try_acquire_or_renew():
                break
            stop.wait(self.retry_period)
        if stop.is_set():
            return
        log.info("Started leading as %s", self.identity)
        on_started()
        try:
            while not stop.is_set():
                stop.wait(self.retry_period)
                if stop.is_set():
                    break
                self.try_acquire_or_renew()
                if not self.is_leader:
                    log.error("Lost lease %s/%s (not renewed within %.0fs)", self.namespace, self.name, self.renew_deadline)
                    break
        finally:
            if stop.is_set():
                self.release()
            on_stopped()


def lease_holder(lease: Object) -> str:
    """The ``spec.holderIdentity`` of a Lease, ``""`` when free."""
    spec = lease.get("spec")
    return str(spec.get("holderIdentity") or "") if isinstance(spec, dict) else ""


__all__ = ["LeaderElector", "lease_holder", "micro_time"]
