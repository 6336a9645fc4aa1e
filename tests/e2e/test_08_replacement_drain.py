"""An expiring node's replacement survives a drain that a PodDisruptionBudget holds for minutes.

Pods that take :data:`START_SECONDS` to become Ready (kwok's pod-ready stage, delayed by the pod
annotation ``pod-ready.stage.kwok.x-k8s.io/delay``) are restarted just before their node expires,
so the PodDisruptionBudget (``minAvailable: 2`` of 3) allows no eviction for over a minute: longer
than ``ttlSecondsAfterEmpty: 30`` plus the 10 s emptiness settle. The replacement stays empty all
that time and must not be retired; the old node drains one pod at a time onto it. Polled every
second: the replacement exists while the old node does, at least 2 pods Running once the
restarted pods are up, exactly one replacement launched.
"""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, load_manifest, node_age_seconds, walkthrough_source

MANIFESTS = walkthrough_source(prefer_shared=True)
NAME = "slowstart"
START_SECONDS = 75
EXPIRE_AFTER = 60


def provisioner(ttl_until_expired: int | None) -> dict[str, Any]:
    manifest = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    manifest["metadata"]["name"] = NAME
    manifest["spec"]["ttlSecondsAfterEmpty"] = 30
    manifest["spec"].pop("ttlSecondsUntilExpired", None)
    if ttl_until_expired is not None:
        manifest["spec"]["ttlSecondsUntilExpired"] = ttl_until_expired
    return manifest


def deployment(replicas: int, start_delay: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME},
                             "annotations": {"pod-ready.stage.kwok.x-k8s.io/delay": start_delay}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {"karpenter.sh/provisioner-name": NAME},
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
                },
            },
        },
    }


def test_replacement_is_kept_while_a_pdb_holds_the_drain(cluster: LocalCluster) -> None:
    watch = Observer(cluster)
    selector = f"app={NAME}"
    try:
        watch.apply(provisioner(None))
        watch.apply(deployment(3, "1s"))
        watch.wait_for(lambda: len(watch.running(watch.pods(selector))) == 3, 180, "3 pods Running", interval=1)
        [old] = [n["metadata"]["name"] for n in watch.nodes(NAME)]
        watch.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": NAME, "namespace": "default"},
                     "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": NAME}}}})
        watch.wait_for(lambda: node_age_seconds(watch.nodes(NAME)[0]) > EXPIRE_AFTER + 5, 120,
                       f"node {old} older than {EXPIRE_AFTER + 5}s", interval=1)
        # restart the pods with a slow start (scaled through 0 so they come back on the same node)
        watch.scale(NAME, 0)
        watch.wait_for(lambda: not watch.pods(selector), 60, "the pods to be gone", interval=0.5)
        watch.apply(deployment(3, f"{START_SECONDS}s"))
        watch.wait_for(lambda: len([p for p in watch.pods(selector) if p["spec"].get("nodeName") == old]) == 3,
                       60, f"the restarted pods bound to {old}", interval=0.5)
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
        up = False  # the restarted pods were all Running once: from then on, >= 2 at every poll
        running_counts: list[int] = []
        deadline = time.monotonic() + 4 * START_SECONDS + 120
        while time.monotonic() < deadline:
            nodes = {n["metadata"]["name"]: n for n in watch.nodes(NAME)}
            seen_nodes |= set(nodes)
            pods = watch.pods(selector)
            running = len(watch.running(pods))
            up = up or running == 3
            if up:
                running_counts.append(running)
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
        assert waited > START_SECONDS  # the PDB really held the drain
        messages = [e["message"] for e in watch.events(kind="Node", name=replacement) if e["reason"] == "Replacing"]
        assert any(old in m for m in messages), messages
    finally:
        cluster.kubectl("delete", "deployment", NAME, "--wait=false", check=False)
        cluster.kubectl("delete", "pdb", NAME, check=False)
        watch.wait_for(lambda: not watch.pods(selector), 120, "the pods to be deleted", interval=1)
        cluster.kubectl("delete", "provisioners.karpenter.sh", NAME, check=False)
        watch.wait_for(lambda: not watch.nodes(NAME), 180, "the nodes to be deleted", interval=2)
