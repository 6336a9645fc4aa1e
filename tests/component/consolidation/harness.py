"""A cluster for consolidation: the controller process's wiring over FakeKubeAPI, FakeCloudProvider and a FakeClock.

``Cluster`` builds the process as ``groupless controller`` does (:class:`ControllerProcess`,
settings from flags), with its cache following the API synchronously, and plays the other
parts: Nodes launched earlier (a priced instance behind each, Ready), pods bound to them by
kube-scheduler, kwok turning new nodes Ready (:meth:`Cluster.kubelet`). :meth:`Cluster.step`
moves the clock and runs every lifecycle reconcile due; :meth:`Cluster.consolidate` runs one
consolidation pass.
"""

from __future__ import annotations

import itertools
from typing import Any

from provisioner.app.controller import ControllerProcess
from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider, make_instance_type
from provisioner.cloudprovider.types import Machine
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model import labels as wk
from provisioner.model.resources import MIB
from provisioner.settings import from_mapping
from tests.builders.provisioners import provisioner_manifest

ZONE = "ap-south-1a"
ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")


def catalog() -> list[Any]:
    """m5.large, m5.xlarge, m5.2xlarge (on-demand 0.101, 0.202, 0.404 USD/hour; spot 0.4 x)."""
    return [
        make_instance_type("m5.large", 2000, 7577 * MIB, 29, zones=ZONES, price=0.101, overhead={"cpu": 70}),
        make_instance_type("m5.xlarge", 4000, 15300 * MIB, 58, zones=ZONES, price=0.202, overhead={"cpu": 80}),
        make_instance_type("m5.2xlarge", 8000, 30700 * MIB, 58, zones=ZONES, price=0.404, overhead={"cpu": 90}),
    ]


#: What the nodes a test creates offer (cpu milli, memory MiB, on-demand USD/hour).
SHAPES = {"m5.large": (2000, 7577, 0.101), "m5.xlarge": (4000, 15300, 0.202), "m5.2xlarge": (8000, 30700, 0.404)}


class Cluster:
    """``flags``: settings as ``groupless controller`` flags (the consolidation guards among them)."""

    def __init__(self, instance_types: list[Any] | None = None, **flags: str) -> None:
        self.clock = FakeClock()
        self.api = FakeKubeAPI(self.clock)
        self.cloud = FakeCloudProvider(instance_types if instance_types is not None else catalog(), clock=self.clock)
        settings = from_mapping({"cloud_provider": "fake", "node_annotations": "kwok.x-k8s.io/node=fake", **flags})
        self.events = EventRecorder(self.api, clock=self.clock)
        self.process = ControllerProcess(settings, self.api, self.cloud, self.clock, events=self.events)
        self.state = self.process.state
        self.state.resync()
        self.api.subscribe(self.state.handle)
        self.state.subscribe(self.process.pods.on_change)
        self.state.subscribe(self.process.manager.on_change)
        self.process.provisioning.watch_state()
        self.consolidation = self.process.consolidation
        self._ids = itertools.count(1)

    # ---- objects ------------------------------------------------------------------------------
    def provisioner(self, name: str = "default", *, capacity_types: tuple[str, ...] = ("on-demand",),
                    **spec: Any) -> dict[str, Any]:
        spec.setdefault("consolidation", {"enabled": True})
        spec.setdefault("requirements", [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)}])
        spec.setdefault("provider", {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}})
        return self.api.create("Provisioner", provisioner_manifest(name, **spec))

    def node(self, instance_type: str = "m5.xlarge", *, provisioner: str = "default", capacity_type: str = "on-demand",
             annotations: dict[str, str] | None = None) -> str:
        """A Ready node launched earlier: its instance, labels, capacity and price (USD/hour annotation)."""
        n = next(self._ids)
        cpu, memory, price = SHAPES.get(instance_type, (4000, 15300, 0.2))
        if capacity_type == wk.CAPACITY_TYPE_SPOT:
            price = round(price * 0.4, 6)
        instance_id = f"i-{n:017x}"
        name = f"ip-10-0-1-{n}.ap-south-1.compute.internal"
        machine = Machine(provider_id=f"aws:///{ZONE}/{instance_id}", instance_id=instance_id, name=name,
                          instance_type=instance_type, zone=ZONE, capacity_type=capacity_type,
                          launch_time=None, provisioner_name=provisioner)
        self.cloud.add_machine(machine)
        allocatable = {"cpu": f"{cpu - 80}m", "memory": f"{memory}Mi", "pods": "58"}
        self.api.create("Node", {
            "metadata": {
                "name": name,
                "labels": {wk.PROVISIONER_NAME: provisioner, wk.INSTANCE_TYPE: instance_type, wk.ZONE: ZONE,
                           wk.CAPACITY_TYPE: capacity_type, wk.HOSTNAME: name, wk.ARCH: "amd64", wk.OS: "linux"},
                "annotations": {wk.PRICE_ANNOTATION: str(price), **(annotations or {})},
                "finalizers": [wk.TERMINATION_FINALIZER],
            },
            "spec": {"providerID": machine.provider_id},
            "status": {"capacity": {"cpu": f"{cpu}m", "memory": f"{memory}Mi", "pods": "58"},
                       "allocatable": allocatable},
        })
        self.api.set_node_ready(name)
        return name

    def pod(self, name: str, node: str | None, cpu: str = "1", *, labels: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None, owner: str | None = "ReplicaSet") -> dict[str, Any]:
        """A pod requesting ``cpu`` (and 1Gi), bound to ``node`` and Running (pending when ``node`` is None)."""
        metadata: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {"app": "web"}}
        if owner:
            metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                            "uid": f"uid-{name}-owner", "controller": True}]
        if annotations:
            metadata["annotations"] = annotations
        spec = {"containers": [{"name": "c", "image": "pause",
                                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
        status: dict[str, Any] = {"phase": "Pending"}
        if node is None:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        self.api.create("Pod", {"metadata": metadata, "spec": spec, "status": status})
        if node is not None:
            self.api.bind(name, "default", node)
            self.api.set_pod_running(name, "default")
        return self.api.get("Pod", name, "default")

    def daemonset_pod(self, name: str, node: str) -> dict[str, Any]:
        return self.pod(name, node, "100m", owner="DaemonSet")

    # ---- driving ------------------------------------------------------------------------------
    def settle(self) -> None:
        self.api.reap()
        self.process.manager.run_until_idle()

    def step(self, seconds: float = 1.0) -> None:
        self.clock.advance(seconds)
        self.settle()

    def consolidate(self) -> float:
        """One consolidation pass; the lifecycle controllers then run what it set off."""
        wait = self.consolidation.run_once()
        self.settle()
        return wait

    def kubelet(self) -> None:
        """Every node that is not Ready becomes Ready (kwok's part)."""
        for node in self.api.list("Node")[0]:
            conditions = (node.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                self.api.set_node_ready(node["metadata"]["name"])

    def run(self, seconds: int) -> None:
        """``seconds`` one-second steps, kwok turning new nodes Ready."""
        for _ in range(seconds):
            self.kubelet()
            self.step(1)

    # ---- reading ------------------------------------------------------------------------------
    def nodes(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.api.list("Node")[0])

    def node_object(self, name: str) -> dict[str, Any]:
        return self.api.get("Node", name)

    def taint_keys(self, name: str) -> list[str]:
        return [t["key"] for t in self.node_object(name)["spec"].get("taints", [])]

    def messages(self, name: str, reason: str) -> list[str]:
        return [e["message"] for e in self.api.events(involved_name=name, reason=reason)]

    def instance_types_of_nodes(self) -> list[str]:
        return sorted(n["metadata"]["labels"].get(wk.INSTANCE_TYPE, "") for n in self.api.list("Node")[0])
