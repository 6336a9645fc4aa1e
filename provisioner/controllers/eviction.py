"""Evicting pods through the Eviction API with per-pod exponential backoff.

Why the Eviction API and never a plain delete: the API server checks every
PodDisruptionBudget covering the pod and answers 429 when the eviction would break one. Drains
of several nodes running at once therefore share each budget correctly, because the API server
arbitrates every single eviction; nothing here counts budgets itself.

Backoff follows Karpenter v0.6.3's eviction queue: per pod, exponential from 100 ms doubling to
10 s, with no timeout and no force delete. State is in memory on purpose: after a restart the
worst case is one early retry.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from provisioner import metrics
from provisioner.clock import Clock
from provisioner.controllers import objects
from provisioner.controllers.objects import EventSink
from provisioner.kube.api import ApiError, KubeAPI, NotFoundError, Object, TooManyRequestsError

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Backoff:
    next_at: float
    delay: float
    failures: int


class Evictor:
    """Evicts pods, remembering when each may be tried again.

    ``evict(pod, node_name)`` returns ``"evicted"`` (also for a pod this Evictor already evicted:
    a cache that has not yet seen its deletion must not cause a second eviction), ``"gone"``, ``"blocked"`` (429: a
    PodDisruptionBudget forbids it now), ``"error"`` (any other API error) or ``"waiting"``
    (its backoff has not elapsed; nothing was sent). ``next_retry()`` is the soonest moment a
    backed-off pod may be retried (epoch seconds) or ``None``.
    """

    def __init__(
        self, kube: KubeAPI, clock: Clock, events: EventSink, *, base: float = 0.1, maximum: float = 10.0
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.events = events
        self.base = base
        self.maximum = maximum
        self._backoff: dict[str, _Backoff] = {}
        self._node_of: dict[str, str] = {}
        self._evicted: set[str] = set()
        self._lock = threading.Lock()  # workers drain different nodes at once

    @staticmethod
    def key(pod: Object) -> str:
        return str(objects.meta(pod).get("uid") or objects.ref(pod))

    def due(self, pod: Object) -> bool:
        with self._lock:
            entry = self._backoff.get(self.key(pod))
        return entry is None or entry.next_at <= self.clock.now() + 1e-3  # float slack at epoch magnitudes

    def next_retry(self, pods: list[Object]) -> float | None:
        with self._lock:
            times = [self._backoff[k].next_at for k in map(self.key, pods) if k in self._backoff]
        return min(times) if times else None

    def forget(self, pods: list[Object]) -> None:
        with self._lock:
            for pod in pods:
                self._backoff.pop(self.key(pod), None)
                self._node_of.pop(self.key(pod), None)
                self._evicted.discard(self.key(pod))

    def forget_node(self, node_name: str) -> None:
        """Drop the backoff of every pod tried on ``node_name`` (its drain is over)."""
        with self._lock:
            for key in [k for k, n in self._node_of.items() if n == node_name]:
                self._backoff.pop(key, None)
                self._evicted.discard(key)
                del self._node_of[key]

    def _fail(self, key: str) -> _Backoff:
        with self._lock:
            entry = self._backoff.get(key)
            delay = self.base if entry is None else min(entry.delay * 2, self.maximum)
            failures = 1 if entry is None else entry.failures + 1
            entry = _Backoff(next_at=self.clock.now() + delay, delay=delay, failures=failures)
            self._backoff[key] = entry
            return entry

    def _clear(self, key: str) -> None:
        with self._lock:
            self._backoff.pop(key, None)

    def evict(self, pod: Object, node: Object) -> str:
        key = self.key(pod)
        with self._lock:
            if key in self._evicted:
                return "evicted"
        if not self.due(pod):
            return "waiting"
        with self._lock:
            self._node_of[key] = objects.name(node)
        pod_ref = objects.ref(pod)
        node_name = objects.name(node)
        try:
            self.kube.evict(objects.name(pod), objects.namespace(pod))
        except NotFoundError:
            self._clear(key)
            metrics.EVICTIONS.labels(outcome="not_found").inc()
            return "gone"
        except TooManyRequestsError as error:
            entry = self._fail(key)
            metrics.EVICTIONS.labels(outcome="pdb_blocked").inc()
            log.info("Did not evict pod %s due to PDB violation", pod_ref)
            if entry.failures == 1:
                message = f"Eviction of {pod_ref} from node {node_name} blocked by a PodDisruptionBudget (PDB): {error.message}"
                self.events.warning(pod, "DrainBlocked", message)
                self.events.warning(node, "DrainBlocked", message)
            return "blocked"
        except ApiError as error:
            entry = self._fail(key)
            metrics.EVICTIONS.labels(outcome="error").inc()
            if error.status == 500 and "DisruptionBudget" in error.message:
                # kube-apiserver refuses to evict a pod covered by more than one PDB
                log.error("Failed to evict pod %s: PDB misconfiguration (%s)", pod_ref, error.message)
                if entry.failures == 1:
                    message = f"Eviction of {pod_ref} from node {node_name} blocked: PDB misconfiguration: {error.message}"
                    self.events.warning(pod, "DrainBlocked", message)
                    self.events.warning(node, "DrainBlocked", message)
                return "error"
            log.error("Failed to evict pod %s from node %s (retry in %.1fs): %s", pod_ref, node_name, entry.delay, error)
            return "error"
        self._clear(key)
        with self._lock:
            self._evicted.add(key)
        metrics.EVICTIONS.labels(outcome="evicted").inc()
        log.info("Evicted pod %s from node %s", pod_ref, node_name)
        self.events.normal(pod, "Evicted", f"Evicted pod from node {node_name} (draining)")
        self.events.normal(node, "Evicted", f"Evicted pod {pod_ref}")
        return "evicted"
