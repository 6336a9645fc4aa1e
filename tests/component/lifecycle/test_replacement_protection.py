"""A replacement outlives a drain held by a PodDisruptionBudget, and a lost one is replaced once.

The scenario of a real cluster where pods take minutes to become Ready: a rollout restarts the
pods of a node a minute before it expires, so when it expires its pods are still starting and
the PodDisruptionBudget (``minAvailable: 2`` of 3) allows no eviction for five minutes. The
replacement, launched and Ready at once, holds no pod all that time, far beyond
``ttlSecondsAfterEmpty: 30``. It must not be retired as empty while the node it replaces
exists; if it is lost anyway, exactly one new replacement is launched for the pods still on the
draining node.

Everything but the kubelet and kube-scheduler is the real code, wired as the process wires it:
ClusterState, the ProvisioningController behind the process's replacer, the lifecycle manager,
the fake API's Eviction API and PodDisruptionBudget accounting, the fake cloud, a FakeClock. The
test plays the kubelet (nodes Ready at once, pods Running at once but Ready only
:data:`READY_AFTER` seconds after binding), kube-scheduler (binds a pending inflate pod to a Ready,
untainted node) and the ReplicaSet (recreates an evicted pod).
"""

from __future__ import annotations

import json
from typing import Any

from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.fake import pod_is_healthy
from provisioner.model.replacements import REPLACEMENTS_ANNOTATION
from provisioner.state.cluster import ClusterState

from .conftest import Cluster
from .test_walkthrough_upgrade import inflate

#: Seconds from binding until a pod reports Ready (its readiness probe passes).
READY_AFTER = 300.0
STEP = 5.0

PROVISIONER = {
    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
    "ttlSecondsAfterEmpty": 30,
    "ttlSecondsUntilExpired": 1800,
}
#: When the rollout restarts the pods, in seconds after the node's launch.
ROLLOUT_AT = 1740.0


class SlowStart:
    """The cluster of the module docstring, with the observations the tests assert on."""

    def __init__(self) -> None:
        self.cluster = Cluster()
        self.kube, self.clock = self.cluster.kube, self.cluster.clock
        self.state = ClusterState(self.kube, self.clock)
        self.kube.subscribe(self.state.handle)
        # one instance type that holds the three 1-CPU pods: one node before, one replacement after
        self.cluster.cloud.instance_types = [t for t in self.cluster.cloud.instance_types if t.name == "m5.xlarge"]
        self.provisioning = ProvisioningController(self.kube, self.state, self.cluster.cloud, self.clock,
                                                   self.cluster.events)
        self.cluster.manager.expiration.replacer = self.provisioning.replace  # what ControllerProcess wires
        self.cluster.provisioner(**PROVISIONER)
        self.state.resync()
        self.bound_at: dict[str, float] = {}
        self.running: list[int] = []  # inflate pods Running, at every observation
        serial = iter(range(100))
        self.kube.on_pod_deleted(lambda pod: self.kube.create("Pod", inflate(f"inflate-r{next(serial)}"))
                                 if pod["metadata"].get("labels", {}).get("app") == "inflate" else None)
        self.kube.subscribe(lambda kind, event: self.observe() if kind == "Pod" else None)

    def observe(self) -> None:
        pods, _ = self.kube.list("Pod", "default")
        self.running.append(sum(1 for p in pods if p["status"].get("phase") == "Running"
                                and not p["metadata"].get("deletionTimestamp")))

    def nodes(self) -> dict[str, dict[str, Any]]:
        items, _ = self.kube.list("Node")
        return {n["metadata"]["name"]: n for n in items}

    def pods(self) -> list[dict[str, Any]]:
        return self.kube.list("Pod", "default")[0]

    def kubelet_and_scheduler(self) -> None:
        now = self.clock.now()
        for name, node in self.nodes().items():
            if not any(c.get("type") == "Ready" for c in node.get("status", {}).get("conditions", [])):
                self.kube.set_node_ready(name)
        for pod in self.pods():
            meta, spec = pod["metadata"], pod["spec"]
            if meta.get("deletionTimestamp"):
                continue
            if spec.get("nodeName"):
                ready = now >= self.bound_at[meta["name"]] + READY_AFTER
                if pod["status"].get("phase") != "Running" or (ready and not pod_is_healthy(pod)):
                    self.kube.set_pod_running(meta["name"], "default", ready=ready)
                continue
            for name, node in self.nodes().items():
                if not node["spec"].get("taints") and not node["spec"].get("unschedulable") \
                        and not node["metadata"].get("deletionTimestamp"):
                    self.kube.bind(meta["name"], "default", name)
                    self.bound_at[meta["name"]] = now
                    break

    def tick(self) -> None:
        self.cluster.step(STEP)
        self.provisioning.reconcile()
        self.kubelet_and_scheduler()

    def start(self) -> str:
        """Three inflate pods on one node, restarted just before it expires; returns the node's name."""
        for i in range(3):
            self.kube.create("Pod", inflate(f"inflate-{i}"))
        [old] = self.provisioning.reconcile().nodes
        for _ in range(3):  # Ready, then initialised (startup taint off), then the pods bound
            self.cluster.settle()
            self.kubelet_and_scheduler()
        assert sorted(p["spec"].get("nodeName") for p in self.pods()) == [old] * 3
        self.cluster.step(ROLLOUT_AT)
        self.kubelet_and_scheduler()
        assert sum(1 for p in self.pods() if pod_is_healthy(p)) == 3
        for pod in self.pods():  # the rollout: each pod is recreated by its ReplicaSet and starts again
            self.kube.delete("Pod", pod["metadata"]["name"], "default")
        for _ in range(3):
            self.cluster.settle()
            self.kubelet_and_scheduler()
        assert sorted(p["spec"].get("nodeName") for p in self.pods()) == [old] * 3
        assert not any(pod_is_healthy(p) for p in self.pods())
        self.kube.create("PodDisruptionBudget", {
            "metadata": {"name": "inflate-pdb", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "inflate"}}}})
        self.running.clear()  # the rollout itself is no disruption of ours
        return old

    def until_expired(self, old: str) -> str:
        """Run until the expired node has its replacement recorded; returns the replacement's name."""
        for _ in range(int(2 * (1800 - ROLLOUT_AT) / STEP)):
            self.tick()
            recorded = self.nodes()[old]["metadata"].get("annotations", {}).get(REPLACEMENTS_ANNOTATION)
            if recorded:
                [new] = [n for n in self.nodes() if n != old]
                return new
        raise AssertionError(f"node {old} was never replaced")


def test_replacement_survives_a_drain_held_for_five_minutes_and_takes_every_pod() -> None:
    world = SlowStart()
    old = world.start()
    new = world.until_expired(old)
    held_until = world.clock.now() + 180  # no pod is Ready before this: the PDB allows nothing
    drained = False
    for _ in range(400):
        world.tick()
        nodes = world.nodes()
        if old in nodes:
            assert new in nodes and not nodes[new]["metadata"].get("deletionTimestamp"), \
                f"replacement {new} retired while {old} drains (t={world.clock.now():.0f})"
        if world.clock.now() < held_until:
            assert old in nodes and all(p["spec"].get("nodeName") == old for p in world.pods())
        if old not in nodes and sum(1 for p in world.pods() if pod_is_healthy(p)) == 3:
            drained = True
            break
    assert drained
    assert sorted(p["spec"]["nodeName"] for p in world.pods()) == [new] * 3
    assert [m.name for m in world.cluster.cloud.machines] == [new]
    assert len(world.cluster.cloud.launches) == 2  # the first node and exactly one replacement
    assert min(world.running) >= 2
    assert "Replacing" in world.cluster.reasons(new)
    messages = [e["message"] for e in world.kube.events(involved_name=new) if e["reason"] == "Replacing"]
    assert any(old in m for m in messages)


def test_a_replacement_lost_mid_drain_is_replaced_exactly_once() -> None:
    world = SlowStart()
    old = world.start()
    first = world.until_expired(old)
    for _ in range(6):  # the old node is draining now, held by the PDB
        world.tick()
    assert world.nodes()[old]["metadata"].get("deletionTimestamp")
    assert all(p["spec"].get("nodeName") == old for p in world.pods())
    world.kube.delete("Node", first)  # lost out of band: a user, or a failed health check
    second = None
    for _ in range(6):  # replaced again at once, while the PDB still holds every pod on the old node
        world.tick()
        others = [n for n in world.nodes() if n not in (old, first)]
        if others:
            [second] = others
            break
    assert second is not None, "no new replacement while the drain was held"
    assert all(p["spec"].get("nodeName") == old for p in world.pods())
    recorded = world.nodes()[old]["metadata"]["annotations"][REPLACEMENTS_ANNOTATION]
    assert json.loads(recorded) == [second]
    for _ in range(400):
        world.tick()
        nodes = world.nodes()
        if old not in nodes and first not in nodes and sum(1 for p in world.pods() if pod_is_healthy(p)) == 3:
            break
    assert set(world.nodes()) == {second}
    assert sorted(p["spec"]["nodeName"] for p in world.pods()) == [second] * 3
    assert len(world.cluster.cloud.launches) == 3  # the first node, the lost replacement, one new replacement
    assert min(world.running) >= 2
