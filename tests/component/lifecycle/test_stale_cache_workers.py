"""Real worker threads over a cache that lags the API server, as the process's informers do.

The controller log showed every termination step twice per node ("Cordoned node", "Evicted
pod", "Terminated instance", "Deleted node"): not two workers on one key (the work queue hands
a key to one worker at a time, checked below) but one worker requeued at once after its own
write, reading the cache's older copy of the Node and redoing the step. These tests feed the
cache through a thread that delivers each watch event a few milliseconds late and count the
side effects per node.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from typing import Any

import pytest

from provisioner.clock import RealClock
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import Machine
from provisioner.controllers.manager import Manager, PodsByNode
from provisioner.controllers.objects import Context
from provisioner.controllers.workqueue import WorkQueue
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model.labels import PROVISIONER_NAME, TERMINATION_FINALIZER
from provisioner.state.cluster import ClusterState
from tests.builders.expectations import eventually

NODES = 3
LAG = 0.02  # seconds between a write and its watch event reaching the cache


class LaggingCluster:
    def __init__(self) -> None:
        self.clock = RealClock()
        self.kube = FakeKubeAPI(self.clock)
        self.cloud = FakeCloudProvider(clock=self.clock)
        self.state = ClusterState(self.kube, self.clock)
        self.events: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self.kube.subscribe(self._send)
        self._lock = threading.Lock()
        self.undelivered = 0  # watch events written to the API that have not reached the cache yet
        self.reconciling = 0  # reconciles running in a worker
        self.pods = PodsByNode()
        self.ctx = Context(kube=self.kube, cloud=self.cloud, clock=self.clock, pods_on_node=self.pods,
                           reader=self.state.get, lister=self.state.objects)
        self.manager = Manager(self.ctx)
        self._process = self.manager.process
        self.manager.process = self._counted_process  # type: ignore[method-assign]
        self.state.subscribe(self.pods.on_change)
        self.state.subscribe(self.manager.on_change)
        self.state.resync()
        self.stop = threading.Event()
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        self.feeder.start()

    def _send(self, kind: str, event: Any) -> None:
        with self._lock:
            self.undelivered += 1
        self.events.put((kind, event))

    def _feed(self) -> None:
        while (item := self.events.get()) is not None:
            time.sleep(LAG)
            self.state.handle(*item)
            with self._lock:
                self.undelivered -= 1

    def _counted_process(self, key: Any) -> None:
        with self._lock:
            self.reconciling += 1
        try:
            self._process(key)
        finally:
            with self._lock:
                self.reconciling -= 1

    def cache_current(self) -> bool:
        """Every watch event written so far has reached the cache."""
        with self._lock:
            return self.undelivered == 0

    def settled(self) -> bool:
        """Nothing more can happen: the cache is current, no reconcile runs and none is queued."""
        with self._lock:
            quiet = self.undelivered == 0 and self.reconciling == 0
        return quiet and len(self.manager.queue) == 0 and self.manager.queue.next_due() is None

    def populate(self) -> None:
        self.kube.create("Provisioner", {"metadata": {"name": "default"}, "spec": {}})
        for i in range(NODES):
            provider_id = f"aws:///z/i-{i}"
            self.cloud.add_machine(Machine(provider_id=provider_id, instance_id=f"i-{i}", name=f"n{i}",
                                           instance_type="m5.large", zone="z", capacity_type="on-demand"))
            self.kube.create("Node", {"metadata": {"name": f"n{i}", "labels": {PROVISIONER_NAME: "default"},
                                                   "finalizers": [TERMINATION_FINALIZER]},
                                      "spec": {"providerID": provider_id}})
            self.kube.create("Pod", {"metadata": {"name": f"orphan-{i}", "namespace": "default"},
                                     "spec": {"containers": [{"name": "c", "image": "x"}]},
                                     "status": {"phase": "Pending"}})
            self.kube.bind(f"orphan-{i}", "default", f"n{i}")
            self.kube.set_pod_running(f"orphan-{i}", "default")

    def close(self) -> None:
        self.stop.set()
        self.events.put(None)
        self.feeder.join(2)


@pytest.fixture
def lagging() -> Any:
    cluster = LaggingCluster()
    yield cluster
    cluster.close()


def test_provisioner_deletion_terminates_each_node_once_with_a_lagging_cache(
        lagging: LaggingCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="provisioner.controllers")
    lagging.populate()
    assert eventually(lambda: len(lagging.state.objects("Node")) == NODES and lagging.cache_current())
    threads = lagging.manager.run_workers(lagging.stop, workers=4)
    lagging.kube.delete("Provisioner", "default")
    # a late duplicate comes from a reconcile that read the cache before an event of its own
    # write arrived: wait until the cache has every event and the workers have nothing left to do
    assert eventually(lambda: not lagging.kube.list("Node")[0] and lagging.settled())
    lagging.stop.set()
    for thread in threads:
        thread.join(2)
    assert not any(thread.is_alive() for thread in threads)
    assert lagging.settled()  # a key taken just before the check above left no work behind

    messages = [r.getMessage() for r in caplog.records]
    cordoned = collections.Counter(m for m in messages if m.startswith("Cordoned node"))
    deleted = collections.Counter(m for m in messages if m.startswith("Deleted node"))
    evictions = collections.Counter(name for verb, kind, name in lagging.kube.calls if verb == "evict")
    assert cordoned == {f"Cordoned node n{i}": 1 for i in range(NODES)}
    assert deleted == {f"Deleted node n{i}": 1 for i in range(NODES)}
    assert collections.Counter(lagging.cloud.delete_calls) == {f"aws:///z/i-{i}": 1 for i in range(NODES)}
    assert evictions == {f"orphan-{i}": 1 for i in range(NODES)}


def test_work_queue_never_hands_one_key_to_two_workers_at_once() -> None:
    work = WorkQueue(RealClock())
    active: collections.Counter[str] = collections.Counter()
    overlaps: list[str] = []
    processed: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            key = work.get(timeout=0.05)
            if key is None:
                continue
            assert isinstance(key, str)
            with lock:
                active[key] += 1
                if active[key] > 1:
                    overlaps.append(key)
            for _ in range(3):
                work.add(key)  # re-added while processing: dirty, handed out again after done
                time.sleep(0.001)
            with lock:
                active[key] -= 1
                processed[key] += 1
            work.done(key)
            with lock:
                if all(processed[k] >= 5 for k in ("a", "b")):
                    stop.set()

    for key in ("a", "b"):
        work.add(key)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert overlaps == []
    assert processed["a"] >= 5 and processed["b"] >= 5
