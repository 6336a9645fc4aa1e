"""The walkthrough's node upgrade with the real provisioning engine: expiry, replacement, PDB-safe drain.

Everything but the kubelet and kube-scheduler is the real code: ClusterState, the
ProvisioningController (``provision(pods, exclude_nodes={old})`` for replacement capacity),
the lifecycle manager, the fake API's Eviction API, the fake cloud. The test plays the
kubelet (nodes turn Ready, pods start a step after binding), kube-scheduler (binds pending
inflate pods to the node nominated for them, never to a tainted node) and the ReplicaSet.
"""

from __future__ import annotations

from typing import Any

from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.fake import pod_is_healthy
from provisioner.model.labels import DISRUPTED_TAINT_KEY
from provisioner.state.cluster import ClusterState
from tests.builders.pods import unschedulable_status

from .conftest import Cluster

PROVISIONER = {
    "requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
    ],
    "limits": {"resources": {"cpu": "1000"}},
    "ttlSecondsAfterEmpty": 30,
    "ttlSecondsUntilExpired": 1800,
}


def inflate(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "inflate"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "inflate-1",
                                              "uid": "rs-uid", "controller": True}]},
            "spec": {"containers": [{"name": "inflate", "image": "pause",
                                     "resources": {"requests": {"cpu": "1"}}}]},
            "status": unschedulable_status()}


def test_expired_node_is_replaced_by_the_provisioning_engine_within_the_pdb() -> None:
    cluster = Cluster()
    kube, clock = cluster.kube, cluster.clock
    state = ClusterState(kube, clock)
    kube.subscribe(state.handle)
    # one instance type that holds the three 1-CPU pods, so the packing is the walkthrough's one node
    cluster.cloud.instance_types = [t for t in cluster.cloud.instance_types if t.name == "m5.xlarge"]
    provisioning = ProvisioningController(kube, state, cluster.cloud, clock, cluster.events)
    cluster.manager.expiration.replacer = provisioning.replace  # what ControllerProcess wires
    cluster.provisioner(**PROVISIONER)
    state.resync()

    def nodes() -> dict[str, dict[str, Any]]:
        items, _ = kube.list("Node")
        return {n["metadata"]["name"]: n for n in items}

    def scheduler_and_kubelet() -> None:
        for name, node in nodes().items():
            if not any(c.get("type") == "Ready" for c in node.get("status", {}).get("conditions", [])):
                kube.set_node_ready(name)
        pods, _ = kube.list("Pod", "default")
        for pod in pods:
            meta = pod["metadata"]
            if pod["spec"].get("nodeName"):
                if pod["status"].get("phase") != "Running" and not meta.get("deletionTimestamp"):
                    kube.set_pod_running(meta["name"], "default")
                continue
            for name, node in nodes().items():  # kube-scheduler: any Ready, untainted, schedulable node
                if not node["spec"].get("taints") and not node["spec"].get("unschedulable"):
                    kube.bind(meta["name"], "default", name)
                    break

    serial = iter(range(100))
    kube.on_pod_deleted(lambda pod: kube.create("Pod", inflate(f"inflate-r{next(serial)}"))
                        if pod["metadata"].get("labels", {}).get("app") == "inflate" else None)

    for i in range(3):
        kube.create("Pod", inflate(f"inflate-{i}"))
    result = provisioning.reconcile()
    assert len(result.nodes) == 1
    [old] = result.nodes  # launched for these very pods: the replacement must not reuse its request id
    for _ in range(3):
        cluster.settle()
        scheduler_and_kubelet()
    assert provisioning.reconcile().nodes == ()  # the pods run: nothing to launch
    assert sorted(p["spec"].get("nodeName") for p in kube.list("Pod", "default")[0]) == [old] * 3
    kube.create("PodDisruptionBudget", {"metadata": {"name": "inflate-pdb", "namespace": "default"},
                                        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "inflate"}}}})
    healthy: list[int] = []
    kube.subscribe(lambda kind, event: healthy.append(sum(
        1 for p in kube.list("Pod", "default")[0]
        if p["metadata"].get("labels", {}).get("app") == "inflate" and pod_is_healthy(p))) if kind == "Pod" else None)

    cluster.step(1800)
    assert DISRUPTED_TAINT_KEY in {t["key"] for t in kube.get("Node", old)["spec"].get("taints", [])}
    replacements = [n for n in nodes() if n != old]
    assert len(replacements) == 1
    [new] = replacements
    for _ in range(120):
        cluster.step(0.5)
        provisioning.reconcile()  # the recreated pods hold nominations: nothing new is launched
        scheduler_and_kubelet()
        if old not in nodes() and sum(1 for p in kube.list("Pod", "default")[0] if pod_is_healthy(p)) == 3:
            break
    assert old not in nodes()
    assert min(healthy) >= 2
    assert sorted(p["spec"]["nodeName"] for p in kube.list("Pod", "default")[0]) == [new] * 3
    assert [m.name for m in cluster.cloud.machines] == [new]
    assert len(cluster.cloud.launches) == 2
