"""The bare control plane works: a kwok-simulated node becomes Ready and a Deployment's pods
are scheduled onto it by kube-scheduler and reported Running by kwok."""

from __future__ import annotations

import json
import time
import uuid

from localcluster.cluster import LocalCluster


def test_kwok_node_runs_scheduled_pods(cluster: LocalCluster) -> None:
    suffix = uuid.uuid4().hex[:6]
    node = f"smoke-{suffix}"
    ns = f"smoke-{suffix}"
    cluster.kubectl("create", "namespace", ns)
    manifest = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"smoke": suffix}},
        "spec": {"taints": [{"key": "smoke", "value": suffix, "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                   "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    }
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        pod = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smoke", "namespace": ns},
            "spec": {"nodeSelector": {"smoke": suffix},
                     "tolerations": [{"key": "smoke", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": "500m"}}}]},
        }
        cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
        deadline = time.monotonic() + 60
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            got = cluster.kubectl_json("get", "pod", "smoke", "-n", ns)
            status = got["status"]
            if status.get("phase") == "Running":
                break
            time.sleep(0.5)
        assert status.get("phase") == "Running", status
        assert got["spec"]["nodeName"] == node
        ready = cluster.kubectl_json("get", "node", node)
        conditions = {c["type"]: c["status"] for c in ready["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        # kwok keeps the capacity the creator set (Groupless relies on this for realistic nodes)
        assert ready["status"]["allocatable"]["cpu"] == "2"
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cluster.kubectl("delete", "node", node, "--wait=false", check=False)
