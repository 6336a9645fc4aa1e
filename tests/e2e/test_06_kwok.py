"""The kwok cloud provider on the real control plane: a burst runs on kwok Nodes with no EC2 (no moto).

This module starts its own local cluster (``Settings(cloud_provider="kwok")``); its ``cluster``
fixture replaces the moto-backed one the rest of the test run shares, so the failure hook of ``conftest.py``
still attaches the Groupless logs.
"""

from __future__ import annotations

import copy
import re
import sys
import time
from collections.abc import Iterator

import pytest

from localcluster.cluster import LocalCluster, Settings
from localcluster.walkthrough import Observer, load_manifest, walkthrough_source
from tests.e2e.conftest import module_cluster

MANIFESTS = walkthrough_source(prefer_shared=True)
PROVISIONER = "kwok-burst"
PODS = 30
LAUNCHED = re.compile(r"Launched instance: (kwok-[0-9a-f]{16}), hostname: (kwok-[0-9a-f]{16}), type: ")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A local cluster whose controller runs ``--cloud-provider kwok``, stopped after this module."""
    with module_cluster("kwok", Settings(cloud_provider="kwok")) as local:
        yield local


def _deployment(replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kwok-burst", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "kwok-burst"}},
            "template": {
                "metadata": {"labels": {"app": "kwok-burst"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "pause",
                                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
                },
            },
        },
    }


def test_a_burst_runs_on_kwok_nodes_without_moto_and_the_nodes_go_when_empty(cluster: LocalCluster) -> None:
    assert "moto" not in cluster.ports and cluster.aws_endpoint_url is None
    assert "moto" not in {c.name for c in cluster.components}
    assert cluster.controller_environment()["GROUPLESS_CLOUD_PROVIDER"] == "kwok"
    watch = Observer(cluster)
    assert "cloud provider kwok" in "\n".join(watch.controller_log.read())

    provisioner = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    provisioner["metadata"]["name"] = PROVISIONER
    watch.apply(provisioner)
    started = time.monotonic()
    try:
        watch.apply(_deployment(PODS))
        watch.wait_for(lambda: len(watch.running(watch.pods("app=kwok-burst"))) == PODS, 240,
                       f"{PODS} burst pods Running on kwok nodes", interval=2)
        elapsed = time.monotonic() - started
        nodes = watch.nodes(PROVISIONER)
        print(f"\n[e2e] {PODS}-pod burst Running in {elapsed:.1f}s on {len(nodes)} kwok node(s)", file=sys.stderr)
        print(watch.node_table(), file=sys.stderr)

        names = {n["metadata"]["name"] for n in nodes}
        for node in nodes:
            name = node["metadata"]["name"]
            assert node["spec"]["providerID"] == f"kwok://{name}"
            assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
            assert node["metadata"]["labels"]["kwok.x-k8s.io/node"] == "fake"
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True", (name, node["status"]["conditions"])
        pods = watch.pods("app=kwok-burst")
        assert {p["spec"]["nodeName"] for p in pods} <= names
        # one launch per node: a node request's instance has one name, so a duplicate would show
        # as a second "Launched instance" line for it
        launches = [m.group(1) for line in watch.controller_log.read() if (m := LAUNCHED.search(line))]
        assert sorted(launches) == sorted(set(launches)) and set(launches) == names, (launches, sorted(names))
    finally:
        cluster.kubectl("delete", "deployment", "kwok-burst", "--wait=false", check=False)
        watch.wait_for(lambda: not watch.pods("app=kwok-burst"), 120, "the burst pods to be deleted", interval=2)
    # ttlSecondsAfterEmpty: 30, then termination deletes the Node (the kwok instance) for good
    watch.wait_for(lambda: not watch.nodes(PROVISIONER), 180, "the empty kwok nodes to be deleted", interval=2)
    terminated = [line for line in watch.controller_log.read() if "Deleted node kwok-" in line]
    assert len(terminated) >= len(names), terminated
    cluster.kubectl("delete", "provisioners.karpenter.sh", PROVISIONER, check=False)
