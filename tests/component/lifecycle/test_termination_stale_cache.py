"""Termination over a cache still holding a Node after its finalizer was removed.

A reconcile can read the informer's copy of the Node (finalizer still on it) after the Node is
gone. It must not terminate and report again: one ``kubectl delete node`` logs "Deleted node"
once, calls TerminateInstances once, counts the ``Terminated`` event once and adds 1 to
``groupless_nodes_terminated_total`` (terminating an instance already gone is success, and the
finalizer patch of a gone Node gets 404). Here the cache is fed by hand, so the Node's
DELETED event reaches it only when the test says so, and the response to the write that
deleted the Node is the Node as last stored (no newer than the cached copy), so
read-your-writes in ``Context`` cannot hide the stale copy.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import Machine
from provisioner.controllers.manager import Manager, PodsByNode
from provisioner.controllers.objects import Context
from provisioner.kube.api import NotFoundError, WatchEvent
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model.labels import PROVISIONER_NAME, TERMINATION_FINALIZER
from provisioner.state.cluster import ClusterState

NODES = 3


class DeletingPatchReturnsOld(FakeKubeAPI):
    """A patch that removes the last finalizer of a deleting object answers with the object as it was."""

    def patch(self, kind: str, name: str, patch: Any, namespace: str | None = None,
              subresource: str | None = None) -> dict[str, Any]:
        before = self.get(kind, name, namespace)
        result = super().patch(kind, name, patch, namespace, subresource)
        try:
            self.get(kind, name, namespace)
        except NotFoundError:
            return before
        return result


class HeldCache:
    """A ClusterState whose watch events are delivered only on :meth:`flush`."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.kube = DeletingPatchReturnsOld(self.clock)
        self.cloud = FakeCloudProvider(clock=self.clock)
        self.recorder = EventRecorder(self.kube, clock=self.clock)
        self.state = ClusterState(self.kube, self.clock)
        self.held: list[tuple[str, WatchEvent]] = []
        self.kube.subscribe(lambda kind, event: self.held.append((kind, event)))
        pods = PodsByNode()
        self.ctx = Context(kube=self.kube, cloud=self.cloud, clock=self.clock, events=self.recorder,
                           pods_on_node=pods, reader=self.state.get, lister=self.state.objects)
        self.manager = Manager(self.ctx)
        self.state.subscribe(pods.on_change)
        self.state.subscribe(self.manager.on_change)
        self.state.resync()

    def flush(self) -> None:
        held, self.held = self.held, []
        for kind, event in held:
            self.state.handle(kind, event)

    def settle(self, rounds: int = 6) -> None:
        """Reconcile, re-enqueue every node as a resync would (cache still stale), then deliver."""
        for _ in range(rounds):
            self.kube.reap()
            self.manager.run_until_idle()
            for node in self.state.objects("Node"):
                self.manager.enqueue_node(node["metadata"]["name"])
            self.manager.run_until_idle()
            self.flush()

    def populate(self) -> list[str]:
        self.kube.create("Provisioner", {"metadata": {"name": "p"}, "spec": {}})
        names = []
        for i in range(NODES):
            provider_id = f"aws:///z/i-{i}"
            self.cloud.add_machine(Machine(provider_id=provider_id, instance_id=f"i-{i}", name=f"n{i}",
                                           instance_type="m5.large", zone="z", capacity_type="on-demand"))
            self.kube.create("Node", {"metadata": {"name": f"n{i}", "labels": {PROVISIONER_NAME: "p"},
                                                   "finalizers": [TERMINATION_FINALIZER]},
                                      "spec": {"providerID": provider_id}})
            names.append(f"n{i}")
        self.flush()
        self.manager.run_until_idle()
        return names


def terminated(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "groupless_nodes_terminated_total", {"provisioner": "p", "reason": reason})
    return value or 0.0


@pytest.fixture
def held() -> HeldCache:
    return HeldCache()


def check_once(held: HeldCache, names: list[str], caplog: pytest.LogCaptureFixture) -> None:
    assert not {n["metadata"]["name"] for n in held.kube.list("Node")[0]} & set(names)
    deleted = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Deleted node")]
    assert sorted(deleted) == [f"Deleted node {n}" for n in names]
    assert sorted(held.cloud.delete_calls) == [f"aws:///z/i-{i}" for i in range(len(names))]
    for name in names:
        events = [e for e in held.kube.events(involved_name=name) if e["reason"] == "Terminated"]
        assert [e.get("count") for e in events] == [1]


def test_kubectl_delete_node_terminates_once_despite_a_stale_cache(
        held: HeldCache, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="provisioner.controllers")
    names = held.populate()[:1]
    before = terminated("deleted")
    held.kube.delete("Node", names[0])
    held.settle()
    check_once(held, names, caplog)
    assert terminated("deleted") - before == 1.0


def test_provisioner_deletion_terminates_each_node_once_despite_a_stale_cache(
        held: HeldCache, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="provisioner.controllers")
    names = held.populate()
    before = terminated("provisioner_deleted")
    held.kube.delete("Provisioner", "p")
    held.settle()
    remaining = held.kube.list("Node")[0]
    assert remaining == [], [n["metadata"]["name"] for n in remaining]
    check_once(held, names, caplog)
    assert terminated("provisioner_deleted") - before == float(len(names))

