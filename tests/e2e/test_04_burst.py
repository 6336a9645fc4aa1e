"""A 200-pod burst of mixed sizes ends fully Running, with one launch per node (no duplicates) and no idle node."""

from __future__ import annotations

import copy
import re
import sys
import time

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, instance_id, load_manifest, matching, walkthrough_source

#: ../shared/walkthrough/ when it is beside the clone (CI), else the copy shipped in the package
MANIFESTS = walkthrough_source(prefer_shared=True)

SIZES = {  # name: (cpu, memory, replicas) -- 200 pods, 92.5 vCPU in all
    "burst-small": ("100m", "128Mi", 50),
    "burst-medium": ("250m", "512Mi", 50),
    "burst-large": ("500m", "1Gi", 50),
    "burst-xlarge": ("1", "2Gi", 50),
}


def _deployment(name: str, cpu: str, memory: str, replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "burst": "true"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "pause",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                },
            },
        },
    }


def test_200_pod_burst_runs_without_duplicate_launches_or_idle_nodes(cluster: LocalCluster) -> None:
    """Every burst pod Running; every launched instance a node, launched once; no idle node.

    The controller launches nodes for batches of the burst and nominates each pod to the node
    planned for it (the node's ``groupless.dev/nominations`` annotation). While such a node
    starts, kube-scheduler's own filters keep pods off it (its not-ready taints) and it retries the
    pods; the extender then rejects every other node for a nominated pod, so the pod cannot take
    room left over on a node launched for other pods of the burst, and waits for its own. When
    that node is up, the extender passes it to its pods and keeps the other pending pods off the
    room promised to them. So every node launched in the burst hosts a burst pod: none sits idle
    until ``ttlSecondsAfterEmpty`` retires it. Duplicate launches are never allowed either: every
    launched instance is a node, and each is launched once.
    """
    watch = Observer(cluster)
    provisioner = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    provisioner["metadata"]["name"] = "burst"
    watch.apply(provisioner)
    before = set(watch.instances())
    watch.controller_log.skip()
    started = time.monotonic()
    try:
        for name, (cpu, memory, replicas) in SIZES.items():
            watch.apply(_deployment(name, cpu, memory, replicas))
        watch.wait_for(lambda: len(watch.running(watch.pods("burst=true"))) == 200, 300,
                       "200 burst pods Running", interval=2)
        elapsed = time.monotonic() - started
        nodes = watch.nodes("burst")
        print(f"\n[e2e] 200-pod burst fully Running in {elapsed:.1f}s on {len(nodes)} node(s)", file=sys.stderr)
        print(watch.node_table(), file=sys.stderr)

        launched = {i: v for i, v in watch.instances().items() if i not in before}
        node_instances = {instance_id(n["spec"]["providerID"]) for n in nodes}
        assert set(launched) == node_instances, (sorted(launched), sorted(node_instances))
        used = {p["spec"]["nodeName"] for p in watch.pods("burst=true")}
        idle = {n["metadata"]["name"] for n in nodes} - used
        print(f"[e2e] launched nodes hosting no burst pod: {len(idle)} of {len(nodes)}", file=sys.stderr)
        promised = {n["metadata"]["name"]: (n["metadata"].get("annotations") or {}).get("groupless.dev/nominations")
                    for n in nodes if n["metadata"]["name"] in idle}
        assert not idle, f"{len(idle)} launched node(s) host no burst pod (their nominations): {promised}"
        launches = matching(watch.controller_log.read(), "launch")
        logged = [m.group(1) for line in launches if (m := re.search(r"Launched instance: (i-\w+)", line))]
        # each instance is launched once (a line may be logged by the provider and the controller)
        assert set(logged) == set(launched), (logged, sorted(launched))
    finally:
        for name in SIZES:
            cluster.kubectl("delete", "deployment", name, "--wait=false", check=False)
        watch.wait_for(lambda: not watch.pods("burst=true"), 120, "burst pods to be deleted", interval=2)
        cluster.kubectl("delete", "provisioners.karpenter.sh", "burst", check=False)
        watch.wait_for(lambda: not watch.nodes("burst"), 180, "the burst nodes to be deleted", interval=2)
