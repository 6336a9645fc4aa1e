"""A small cluster for the lifecycle controllers: FakeClock, FakeKubeAPI, FakeCloudProvider, the manager.

``Cluster`` builds Provisioners, Nodes (with an instance behind each) and Pods the way the
provisioning controller and kubelet would leave them, and plays the parts the tests need:
a kubelet turning nodes Ready (:meth:`Cluster.kubelet`), a ReplicaSet recreating evicted pods,
and a provisioning engine launching replacements (:class:`Replacer`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.cloudprovider.types import Machine
from provisioner.controllers.manager import Manager, PodsByNode
from provisioner.controllers.objects import Context
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model.labels import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    NOT_READY_TAINT_KEY,
    PROVISIONER_NAME,
    TERMINATION_FINALIZER,
    ZONE,
)
from provisioner.settings import ControllerSettings
from provisioner.state.cluster import ClusterState
from tests.builders.provisioners import provisioner_manifest


class Replacer:
    """Stands in for the provisioning engine: one new (not yet Ready) node per call, or none."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.calls: list[tuple[list[str], str]] = []
        self.fit_elsewhere = False

    def __call__(self, pods: Sequence[dict[str, Any]], node_name: str) -> list[str]:
        self.calls.append(([p["metadata"]["name"] for p in pods], node_name))
        if self.fit_elsewhere:
            return []
        source = self.cluster.kube.get("Node", node_name)
        node = self.cluster.node(source["metadata"]["labels"][PROVISIONER_NAME], ready=False)
        return [node["metadata"]["name"]]


class Cluster:
    """``cached``: the controllers read through a ClusterState (as the process does), else live GETs."""

    def __init__(self, settings: ControllerSettings | None = None, *, cached: bool = False) -> None:
        self.clock = FakeClock()
        self.kube = FakeKubeAPI(self.clock)
        self.cloud = FakeCloudProvider(clock=self.clock)
        self.events = EventRecorder(self.kube, clock=self.clock)
        self.ctx = Context(kube=self.kube, cloud=self.cloud, clock=self.clock, events=self.events)
        self.replacer = Replacer(self)
        self.manager = Manager(self.ctx, settings or ControllerSettings(), replacer=self.replacer)
        if cached:
            state = ClusterState(self.kube, self.clock)
            pods = PodsByNode()
            self.kube.subscribe(state.handle)
            state.subscribe(pods.on_change)
            state.subscribe(self.manager.on_change)
            state.resync()
            self.ctx.reader, self.ctx.lister, self.ctx.pods_on_node = state.get, state.objects, pods
        else:
            self.kube.subscribe(self.manager.on_change)
        self._ids = itertools.count(1)

    # ---- objects ------------------------------------------------------------------------------
    def provisioner(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        return self.kube.create("Provisioner", provisioner_manifest(name, **spec))

    def node(self, provisioner: str = "default", *, ready: bool = True, cpu: str = "4", memory: str = "16Gi",
             pods: str = "110", taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
        n = next(self._ids)
        instance_id = f"i-{n:017x}"
        zone = "us-west-2a"
        name = f"ip-10-0-0-{n}.us-west-2.compute.internal"
        machine = Machine(provider_id=f"aws:///{zone}/{instance_id}", instance_id=instance_id, name=name,
                          instance_type="m5.xlarge", zone=zone, capacity_type="on-demand",
                          launch_time=None, provisioner_name=provisioner)
        self.cloud.add_machine(machine)
        startup = [{"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]
        node = self.kube.create("Node", {
            "metadata": {
                "name": name,
                "labels": {PROVISIONER_NAME: provisioner, INSTANCE_TYPE: "m5.xlarge", ZONE: zone,
                           CAPACITY_TYPE: "on-demand"},
                "finalizers": [TERMINATION_FINALIZER],
            },
            "spec": {"providerID": machine.provider_id, "taints": (taints if taints is not None else startup)},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
        })
        if ready:
            node = self.kube.set_node_ready(name)
        return node

    def pod(self, name: str, node: str | None = None, *, namespace: str = "default",
            labels: dict[str, str] | None = None, owner: str | None = "ReplicaSet",
            annotations: dict[str, str] | None = None, priority_class: str | None = None,
            phase: str = "Running", tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
        if owner:
            metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                            "uid": f"uid-{name}-owner", "controller": True}]
        if annotations:
            metadata["annotations"] = annotations
        spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        if tolerations:
            spec["tolerations"] = tolerations
        self.kube.create("Pod", {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}})
        if node is not None:
            self.kube.bind(name, namespace, node)
            if phase == "Running":
                self.kube.set_pod_running(name, namespace)
            else:
                self.kube.patch("Pod", name, {"status": {"phase": phase}}, namespace, subresource="status")
        return self.kube.get("Pod", name, namespace)

    def daemonset_pod(self, name: str, node: str) -> dict[str, Any]:
        return self.pod(name, node, owner="DaemonSet", tolerations=[
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])

    # ---- driving ------------------------------------------------------------------------------
    def settle(self) -> int:
        """Run every reconcile due now until none is (reaping finished graceful deletions)."""
        self.kube.reap()
        return self.manager.run_until_idle()

    def step(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def kubelet(self) -> None:
        """Every node that is not Ready becomes Ready (kwok's part)."""
        nodes, _ = self.kube.list("Node")
        for node in nodes:
            conditions = (node.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                self.kube.set_node_ready(node["metadata"]["name"])

    def nodes(self) -> list[str]:
        items, _ = self.kube.list("Node")
        return sorted(n["metadata"]["name"] for n in items)

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            self.kube.get(kind, name, namespace)
        except Exception:
            return False
        return True

    def reasons(self, name: str) -> list[str]:
        return sorted({e["reason"] for e in self.kube.events(involved_name=name)})


@pytest.fixture(params=["live", "cached"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    return Cluster(cached=request.param == "cached")
