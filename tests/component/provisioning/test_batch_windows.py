"""Batch windows hold while a round launches: the next batch closes on its own idle and maximum windows.

The loop runs on a thread with the fake clock; every launch blocks in the fake cloud until the
test releases it, so the first round stays "launching" for as long as the test likes. Pods that
arrive meanwhile open the next window, which closes 1 s (fake) after its last pod, or 10 s after
it opened, and is solved and launched at once, while the first round's launch is still blocked.
"""

import threading

from provisioner.settings import Batching, NodeDefaults, ProvisioningSettings
from tests.builders.expectations import eventually

from .harness import Cluster
from .test_concurrent_launches import WAIT, GatedCreates, one_node_per_pod
from .test_failures import flexible_template, provisioner_with


class LoopUnderTest:
    """The controller's loop on a thread, with every batch it solves recorded (in order)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.batches = []
        self._cond = threading.Condition()
        begin = cluster.controller.begin

        def recording(batch=None):
            with self._cond:
                self.batches.append(batch)
                self._cond.notify_all()
            return begin(batch)

        cluster.controller.begin = recording
        self.stop = threading.Event()
        self.thread = threading.Thread(target=cluster.controller.run, args=(self.stop,), daemon=True)

    def wait_batches(self, count):
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.batches) >= count, WAIT), self.batches
        return self.batches[count - 1]

    def advance(self, seconds):
        """Move the fake clock and let the loop look at its window again."""
        self.cluster.clock.advance(seconds)
        self.cluster.controller.batcher.poke()


def test_the_next_batch_closes_on_its_idle_and_maximum_windows_while_a_round_launches():
    settings = ProvisioningSettings(
        batching=Batching(idle_seconds=1.0, max_seconds=10.0),
        nodes=NodeDefaults(annotations={"kwok.x-k8s.io/node": "fake"}),
        resync_seconds=3600,
    )
    cluster = Cluster(settings=settings, provisioner=provisioner_with())
    cluster.controller.provisioner.solver = one_node_per_pod
    creates = GatedCreates(cluster.cloud)
    loop = LoopUnderTest(cluster)
    uid = {}

    def pod(name):
        uid[name] = cluster.pending_pod(template=flexible_template("1"), name=name)["metadata"]["uid"]

    loop.thread.start()
    try:
        assert eventually(cluster.controller.batcher.is_open, WAIT)  # the start-up look at pods pending from before
        loop.advance(1.0)
        loop.wait_batches(1)  # none
        pod("a")
        loop.advance(1.0)
        first = loop.wait_batches(2)
        assert first.uids == {uid["a"]} and first.duration == 1.0
        creates.wait_blocked(1)  # round 1 is launching, and stays so until released

        # a pod arrives while round 1 launches: its window closes 1 s later (idle), not when round 1 ends
        pod("b")
        loop.advance(1.0)
        second = loop.wait_batches(3)
        assert second.uids == {uid["b"]} and second.duration == 1.0
        creates.wait_blocked(2)  # round 2 launches beside round 1
        assert ("a", 0) in creates.gates and not creates.gates[("a", 0)].is_set()

        # pods every 0.5 s for 10 s: the window closes at its maximum, 10 s after it opened
        names = [f"c{i:02d}" for i in range(20)]
        for name in names:
            pod(name)
            loop.advance(0.5)
        third = loop.wait_batches(4)
        assert third.uids == {uid[name] for name in names} and third.duration == 10.0
        # round 3's launches start too, rounds 1 and 2 still blocked: as many at once as the
        # launch pool has threads (launch_parallelism), the rest wait for a free one
        creates.wait_blocked(settings.launch_parallelism)
        assert len(creates.gates) == settings.launch_parallelism and not creates.finished

        for _ in range(22):  # release them one by one, the waiting ones included
            creates.wait_blocked(1)
            creates.release(next(key for key, gate in list(creates.gates.items()) if not gate.is_set()))
    finally:
        creates.release_all()
        loop.stop.set()
        loop.thread.join(WAIT)
    assert not loop.thread.is_alive()
    assert len(cluster.nodes()) == 22
    assert cluster.controller.ledger.reservations() == {}
