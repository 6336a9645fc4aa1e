"""An expiring node's replacement survives a drain that a PodDisruptionBudget holds for over a minute.

The node's three pods are Running but not Ready when it expires (their readiness probes fail for
:data:`NOT_READY_SECONDS`: the test plays the kubelet's probe by writing the pods' Ready condition,
which kwok then leaves alone), so the PodDisruptionBudget (``minAvailable: 2`` of 3) allows no
eviction: the Eviction API refuses unhealthy pods while the budget is not met. That lasts longer
than ``ttlSecondsAfterEmpty: 30`` plus the 10 s emptiness settle, and the replacement stays empty
all that time. It must not be retired; once the pods are Ready the old node drains one pod at a
time onto it. Polled every second: the replacement exists while the old node does, at least 2 pods
Running, exactly one replacement launched.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from typing import Any

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, load_manifest, node_age_seconds, walkthrough_source

MANIFESTS = walkthrough_source(prefer_shared=True)
NAME = "slowstart"
NOT_READY_SECONDS = 75
EXPIRE_AFTER = 60


def provisioner(ttl_until_expired: int | None) -> dict[str, Any]:
    manifest = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    manifest["metadata"]["name"] = NAME
    manifest["spec"]["ttlSecondsAfterEmpty"] = 30
    # one type that holds the three pods: one node before, one replacement after
    manifest["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["r6gd.xlarge"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
    ]
    manifest["spec"].pop("ttlSecondsUntilExpired", None)
    if ttl_until_expired is not None:
        manifest["spec"]["ttlSecondsUntilExpired"] = ttl_until_expired
    return manifest


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {"karpenter.sh/provisioner-name": NAME},
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
                },
            },
        },
    }


def set_ready(cluster: LocalCluster, pods: list[dict[str, Any]], ready: bool) -> None:
    """Write each pod's Ready condition, as the kubelet does when its readiness probe fails or passes."""
    value = "True" if ready else "False"
    patch = json.dumps({"status": {"conditions": [{"type": "Ready", "status": value},
                                                  {"type": "ContainersReady", "status": value}]}})
    for pod in pods:
        cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", "default", "--subresource=status",
                        "--type=strategic", "-p", patch)


def pdb_healthy(cluster: LocalCluster) -> int:
    status = cluster.kubectl_json("get", "pdb", NAME, "-n", "default").get("status") or {}
    return int(status.get("currentHealthy", -1))


def test_replacement_is_kept_while_a_pdb_holds_the_drain(cluster: LocalCluster) -> None:
    watch = Observer(cluster)
    selector = f"app={NAME}"
    try:
        watch.apply(provisioner(None))
        watch.apply(deployment(3))
        watch.wait_for(lambda: len(watch.running(watch.pods(selector))) == 3, 180, "3 pods Running", interval=1)
        [old] = [n["metadata"]["name"] for n in watch.nodes(NAME)]
        watch.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": NAME, "namespace": "default"},
                     "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": NAME}}}})
        watch.wait_for(lambda: node_age_seconds(watch.nodes(NAME)[0]) > EXPIRE_AFTER + 5, 120,
                       f"node {old} older than {EXPIRE_AFTER + 5}s", interval=1)
        set_ready(cluster, watch.pods(selector), False)  # readiness probes start failing
        watch.wait_for(lambda: pdb_healthy(cluster) == 0, 60, "the PDB to count 0 healthy pods", interval=0.5)
        watch.apply(provisioner(EXPIRE_AFTER))  # the node is older than that: it expires now
        started = time.monotonic()

        def deleting() -> bool:
            nodes = {n["metadata"]["name"]: n for n in watch.nodes(NAME)}
            return old in nodes and bool(nodes[old]["metadata"].get("deletionTimestamp"))

        watch.wait_for(deleting, 90, f"expired node {old} to be deleted after its replacement is Ready", interval=1)
        [replacement] = [n["metadata"]["name"] for n in watch.nodes(NAME) if n["metadata"]["name"] != old]
        watch.apply(provisioner(None))  # the replacement must not expire in turn during the test
        print(f"\n[e2e] {old} draining, replacement {replacement} Ready, "
              f"{time.monotonic() - started:.0f}s after expiry", file=sys.stderr)

        seen_nodes = {old, replacement}
        running_counts: list[int] = []
        probes_pass_at = started + NOT_READY_SECONDS
        deadline = probes_pass_at + 180
        while time.monotonic() < deadline:
            nodes = {n["metadata"]["name"]: n for n in watch.nodes(NAME)}
            seen_nodes |= set(nodes)
            pods = watch.pods(selector)
            running = len(watch.running(pods))
            running_counts.append(running)
            if probes_pass_at and time.monotonic() >= probes_pass_at:
                assert all(p["spec"].get("nodeName") == old for p in pods), "evicted while the PDB held"
                set_ready(cluster, pods, True)  # the probes pass: the drain may go on
                probes_pass_at = 0.0
            if old in nodes:
                assert replacement in nodes and not nodes[replacement]["metadata"].get("deletionTimestamp"), (
                    f"replacement {replacement} retired while {old} drains, "
                    f"{time.monotonic() - started:.0f}s after expiry")
            elif running == 3 and all(p["spec"].get("nodeName") == replacement for p in pods):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"the drain of {old} did not finish: {watch.pods_wide(selector)}")
        waited = time.monotonic() - started
        print(f"[e2e] drain done {waited:.0f}s after expiry; Running counts seen {sorted(set(running_counts))}",
              file=sys.stderr)
        assert seen_nodes == {old, replacement}, f"more than one replacement launched: {sorted(seen_nodes)}"
        assert min(running_counts) >= 2
        assert waited > NOT_READY_SECONDS  # the PDB really held the drain
        messages = [e["message"] for e in watch.events(kind="Node", name=replacement) if e["reason"] == "Replacing"]
        assert any(old in m for m in messages), messages
    finally:
        cluster.kubectl("delete", "deployment", NAME, "--wait=false", check=False)
        cluster.kubectl("delete", "pdb", NAME, check=False)
        watch.wait_for(lambda: not watch.pods(selector), 120, "the pods to be deleted", interval=1)
        cluster.kubectl("delete", "provisioners.karpenter.sh", NAME, check=False)
        watch.wait_for(lambda: not watch.nodes(NAME), 180, "the nodes to be deleted", interval=2)
