"""Consolidation on the local cluster: a workload scaled down leaves one of its two nodes, which goes, PDB held.

Six pods of 1 CPU on a Provisioner limited to r6gd.xlarge (3 pods a node) fill two nodes; scaled
to three, the ReplicaSet leaves them on one node or split over both. Either way one node is
enough: consolidation (default settings: settle 30 s, re-validation 15 s) deletes the other
(its pods fit on the first, so nothing is launched), through the expiry path: tainted, drained
through the Eviction API, terminated. Polled every second: the PodDisruptionBudget
(``minAvailable: 2``) is never broken, no third node is launched, and the node that goes
carries ``ConsolidationApproved``.
"""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, load_manifest, walkthrough_source

MANIFESTS = walkthrough_source(prefer_shared=True)
NAME = "consolidate"
MIN_AVAILABLE = 2


def provisioner() -> dict[str, Any]:
    manifest = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    manifest["metadata"]["name"] = NAME
    manifest["spec"].pop("ttlSecondsAfterEmpty", None)
    manifest["spec"].pop("ttlSecondsUntilExpired", None)
    manifest["spec"]["consolidation"] = {"enabled": True}
    manifest["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["r6gd.xlarge"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
    ]
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


def ready(pods: list[dict[str, Any]]) -> int:
    """Pods the disruption controller counts healthy: Ready and not being deleted."""
    return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (p.get("status") or {}).get("conditions") or []))


def test_scaled_down_workload_leaves_one_node_and_the_pdb_holds(cluster: LocalCluster) -> None:
    watch = Observer(cluster)
    selector = f"app={NAME}"
    try:
        watch.apply(provisioner())
        watch.apply(deployment(6))
        watch.wait_for(lambda: ready(watch.pods(selector)) == 6, 240, "6 pods Ready", interval=1)
        before = sorted(n["metadata"]["name"] for n in watch.nodes(NAME))
        assert len(before) == 2, before
        watch.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": NAME, "namespace": "default"},
                     "spec": {"minAvailable": MIN_AVAILABLE, "selector": {"matchLabels": {"app": NAME}}}})
        watch.scale(NAME, 3)
        watch.wait_for(lambda: len(watch.pods(selector)) == 3 and ready(watch.pods(selector)) == 3, 60,
                       "3 pods left, Ready", interval=1)
        placed = {p["spec"]["nodeName"] for p in watch.pods(selector)}
        started = time.monotonic()
        seen_nodes = set(before)
        ready_counts: list[int] = []
        deadline = started + 300
        while time.monotonic() < deadline:
            nodes = sorted(n["metadata"]["name"] for n in watch.nodes(NAME))
            seen_nodes |= set(nodes)
            pods = watch.pods(selector)
            ready_counts.append(ready(pods))
            assert ready_counts[-1] >= MIN_AVAILABLE, f"PodDisruptionBudget broken: {watch.pods_wide(selector)}"
            if len(nodes) == 1 and ready_counts[-1] == 3 and all(p["spec"].get("nodeName") == nodes[0] for p in pods):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"no consolidation within 300 s: {watch.node_table()}\n{watch.pods_wide(selector)}")
        took = time.monotonic() - started
        [kept] = nodes
        [gone] = [n for n in before if n != kept]
        print(f"\n[e2e] {gone} consolidated {took:.0f}s after the scale-down (pods were on {sorted(placed)}); "
              f"Ready pods seen {sorted(set(ready_counts))}", file=sys.stderr)
        assert seen_nodes == set(before), f"a node was launched: {sorted(seen_nodes)}"
        if len(placed) == 1:
            assert placed == {kept}  # the empty node went
        messages = [e["message"] for e in watch.events(kind="Node", name=gone) if e["reason"] == "ConsolidationApproved"]
        assert messages and messages[0].startswith(f"delete 1 node(s) ({gone})"), messages
    finally:
        cluster.kubectl("delete", "deployment", NAME, "--wait=false", check=False)
        cluster.kubectl("delete", "pdb", NAME, check=False)
        watch.wait_for(lambda: not watch.pods(selector), 120, "the pods to be deleted", interval=1)
        cluster.kubectl("delete", "provisioners.karpenter.sh", NAME, check=False)
        watch.wait_for(lambda: not watch.nodes(NAME), 180, "the nodes to be deleted", interval=2)
