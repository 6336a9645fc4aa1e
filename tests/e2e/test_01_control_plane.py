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


def test_dev_cluster_env_and_status_describe_the_running_cluster(cluster: LocalCluster) -> None:
    import subprocess
    import sys

    env = subprocess.run([sys.executable, "-m", "provisioner.cli", "dev-cluster", "env", "--name", cluster.name],
                         capture_output=True, text=True, check=True).stdout
    assert f"export KUBECONFIG={cluster.kubeconfig}" in env.splitlines()
    # PATH: the binaries' directory before the shell's own $PATH, expanded only at eval time
    assert f'export PATH="{cluster.binaries.directory}:$PATH"' in env.splitlines()
    shell = subprocess.run(["sh", "-c", f'PATH=/sentinel; {env}\necho "$PATH"'], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert shell == f"{cluster.binaries.directory}:/sentinel"
    status = subprocess.run([sys.executable, "-m", "provisioner.cli", "dev-cluster", "status", "--name", cluster.name],
                            capture_output=True, text=True)
    assert status.returncode == 0, status.stdout
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert any(line.split()[:1] == [component] and "running" in line for line in status.stdout.splitlines()), \
            status.stdout
    # the kubeconfig it prints works with the built kubectl
    version = cluster.kubectl("version", "-o", "json")
    assert '"gitVersion": "v1.36.3"' in version.stdout
