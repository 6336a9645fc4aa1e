"""A 200-pod burst of mixed sizes ends fully Running, with one launch per node (no duplicates)."""

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


def test_200_pod_burst_runs_without_duplicate_launches(cluster: LocalCluster) -> None:
    """Every burst pod Running; every launched instance a node, launched once; at most 5% idle nodes.

    Idle nodes are bounded, not forbidden, because of a known race between the extender and the
    nodes launched for the burst. The controller launches a node for a batch of pending pods and
    nominates them to it (the node's ``groupless.dev/nominations`` annotation). That node cannot
    take them until it is Ready and has lost its not-ready taint; meanwhile kube-scheduler retries
    the pods, and the extender passes any node whose free room, after the pods nominated to it, fits
    the pod (its prioritize prefers the pod's own node, which kube-scheduler's filters still refuse).
    So a pod can land in room left over on a node launched for other pods of the burst. When the
    node launched for it turns Ready nothing is waiting for it: it hosts no burst pod and stays
    empty until ``ttlSecondsAfterEmpty`` retires it. The test reports such nodes and allows at most
    5% of the burst's nodes (``len(nodes) // 20``) to be idle; duplicate launches are never allowed:
    every launched instance is a node, and each is launched once.
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
        # the known race of the docstring: a pod whose own node is still starting may take
        # free room elsewhere, leaving that node idle; bounded at 5% of the burst's nodes
        assert len(idle) <= len(nodes) // 20, f"{len(idle)} launched node(s) host no burst pod: {sorted(idle)}"
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
