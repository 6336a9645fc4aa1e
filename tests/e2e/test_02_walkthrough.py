"""The walkthrough (``../shared/walkthrough/README.md``), step by step, on the real control plane.

The steps share one cluster and build on each other (the node of step 2 is the one that expires
in step 3, ...), so they run in file order; a failing step makes the later ones fail too, each
with its own message.
"""

from __future__ import annotations

import copy
import re
import sys
import time
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import (
    Observer,
    instance_id,
    load_manifest,
    matching,
    node_age_seconds,
    walkthrough_source,
)

#: ../shared/walkthrough/ when it is beside the clone (CI), else the copy shipped in the package
MANIFESTS = walkthrough_source(prefer_shared=True)

NODE_LABELS = {
    "node.kubernetes.io/instance-type": "r6gd.xlarge",
    "kubernetes.io/arch": "arm64",
    "karpenter.sh/capacity-type": "on-demand",
    "topology.kubernetes.io/zone": "ap-south-1a",
}


def report(message: str) -> None:
    print(f"\n[e2e] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def watch(cluster: LocalCluster) -> Observer:
    return Observer(cluster)


# 1 --------------------------------------------------------------------------------------
def test_1_provisioner_is_admitted_and_defaulted(watch: Observer, cluster: LocalCluster) -> None:
    manifest = load_manifest("01-provisioner.yaml", MANIFESTS)
    watch.apply(manifest)
    stored = cluster.kubectl_json("get", "provisioners.karpenter.sh", "default")
    assert stored["spec"]["ttlSecondsAfterEmpty"] == 30
    requirements = {r["key"]: r for r in stored["spec"]["requirements"]}
    assert set(requirements["karpenter.sh/capacity-type"]["values"]) == {"spot", "on-demand"}
    assert set(requirements["kubernetes.io/arch"]["values"]) == {"arm64", "amd64"}
    # the defaulting webhook fills in what the manifest leaves out (an AMI family)
    assert "amiFamily" not in manifest["spec"]["provider"]
    assert stored["spec"]["provider"].get("amiFamily"), stored["spec"]["provider"]


def test_1_defaulting_webhook_adds_arch_and_capacity_type(watch: Observer, cluster: LocalCluster) -> None:
    manifest = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    manifest["metadata"]["name"] = "defaults"
    del manifest["spec"]["requirements"]
    watch.apply(manifest)
    try:
        stored = cluster.kubectl_json("get", "provisioners.karpenter.sh", "defaults")
        requirements = {r["key"]: (r["operator"], r["values"]) for r in stored["spec"]["requirements"]}
        # Karpenter v0.6.3's AWS DefaultHook: arch In [amd64], capacity-type In [on-demand]
        assert requirements["kubernetes.io/arch"] == ("In", ["amd64"])
        assert requirements["karpenter.sh/capacity-type"] == ("In", ["on-demand"])
    finally:
        cluster.kubectl("delete", "provisioners.karpenter.sh", "defaults")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda spec: spec.update(ttlSecondsAfterEmpty=-1), "ttlSecondsAfterEmpty"),
        (lambda spec: spec["requirements"].append({"key": "kubernetes.io/arch", "operator": "Near", "values": ["arm64"]}),
         "operator"),
        (lambda spec: spec["provider"].pop("subnetSelector"), "subnetSelector"),
    ],
    ids=["negative-ttl", "unsupported-operator", "missing-subnetSelector"],
)
def test_1_invalid_provisioner_is_rejected_with_our_message(watch: Observer, change: Any, field: str) -> None:
    manifest = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    manifest["metadata"]["name"] = f"invalid-{field.lower()}"
    change(manifest["spec"])
    result = watch.apply(manifest, check=False)
    assert result.returncode != 0, result.stdout
    assert "admission webhook" in result.stderr and "denied the request" in result.stderr, result.stderr
    assert field in result.stderr, result.stderr


# 2 --------------------------------------------------------------------------------------
def test_2_scale_to_3_launches_one_right_sized_node(watch: Observer, cluster: LocalCluster) -> None:
    watch.controller_log.skip()
    watch.apply(load_manifest("02-inflate-deployment.yaml", MANIFESTS))
    started = time.monotonic()
    watch.scale("inflate", 3)
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 3, 120, "3 inflate pods Running")
    elapsed = time.monotonic() - started
    report(f"scale to 3 -> 3 pods Running in {elapsed:.1f}s")
    print(watch.node_table(), file=sys.stderr)

    nodes = watch.nodes("default")
    assert len(nodes) == 1, [n["metadata"]["name"] for n in nodes]
    node = nodes[0]
    labels = node["metadata"]["labels"]
    assert {k: labels.get(k) for k in NODE_LABELS} == NODE_LABELS
    assert labels["karpenter.sh/provisioner-name"] == "default"
    pods = watch.pods()
    assert {p["spec"]["nodeName"] for p in pods} == {node["metadata"]["name"]}

    live = watch.live_instances()
    iid = instance_id(node["spec"]["providerID"])
    assert iid in live and live[iid]["type"] == "r6gd.xlarge" and live[iid]["zone"] == "ap-south-1a"
    assert len(live) == 1, live

    lines = watch.controller_log.read()
    assert matching(lines, "batch"), "\n".join(lines[-40:])
    packing = matching(lines, "packing")
    assert packing and "for 3 pod(s)" in packing[-1] and "r6gd.xlarge" in packing[-1], packing
    launch = matching(lines, "launch")
    assert launch and {re.search(r"i-\w+", line).group(0) for line in launch} == {iid}, launch  # type: ignore[union-attr]
    assert "type: r6gd.xlarge, zone: ap-south-1a, capacityType: on-demand" in launch[-1]

    for pod in pods:
        reasons = {e["reason"] for e in watch.events(kind="Pod", name=pod["metadata"]["name"])}
        assert "Nominated" in reasons, (pod["metadata"]["name"], reasons)

    # kube-scheduler consulted the extender over HTTPS, and every answer was a 200
    requests = watch.extender_requests()
    assert requests.get(("filter", "200"), 0) >= 3, requests
    assert all(code == "200" for _, code in requests), requests


# 3 --------------------------------------------------------------------------------------
def test_3_expired_node_is_replaced_within_the_pdb(watch: Observer, cluster: LocalCluster) -> None:
    watch.apply(load_manifest("03-pdb.yaml", MANIFESTS))
    watch.wait_for(
        lambda: (cluster.kubectl_json("get", "pdb", "inflate-pdb").get("status") or {}).get("disruptionsAllowed") == 1,
        60, "the PDB status (disruptionsAllowed 1)")
    [old] = watch.nodes("default")
    old_name = old["metadata"]["name"]
    old_instance = instance_id(old["spec"]["providerID"])
    # the walkthrough's 1800 s shortened: the node expires a few seconds from now
    ttl = max(20, int(node_age_seconds(old)) + 5)
    expiring = load_manifest("04-provisioner-with-expiry.yaml", MANIFESTS)
    expiring["spec"]["ttlSecondsUntilExpired"] = ttl
    watch.controller_log.skip()
    started = time.monotonic()
    watch.apply(expiring)

    lowest = [3]
    reapplied = [False]

    def poll() -> None:
        lowest[0] = min(lowest[0], len(watch.running(watch.pods())))
        # once the old node is on its way out, stop expiry so the replacement does not expire in turn
        if not reapplied[0]:
            current = {n["metadata"]["name"]: n for n in watch.nodes("default")}
            if old_name not in current or current[old_name]["metadata"].get("deletionTimestamp"):
                watch.apply(load_manifest("01-provisioner.yaml", MANIFESTS))
                reapplied[0] = True

    watch.wait_for(lambda: old_name not in {n["metadata"]["name"] for n in watch.nodes("default")},
                   ttl + 180, f"expired node {old_name} to be deleted", interval=0.5, on_poll=poll)
    if not reapplied[0]:
        watch.apply(load_manifest("01-provisioner.yaml", MANIFESTS))
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 3, 120, "3 inflate pods Running again",
                   on_poll=poll)
    report(f"expired node replaced in {time.monotonic() - started:.1f}s (ttl {ttl}s); "
           f"lowest number of Running inflate pods seen: {lowest[0]}")
    print(watch.node_table(), file=sys.stderr)

    assert lowest[0] >= 2
    [new] = watch.nodes("default")
    assert new["metadata"]["name"] != old_name
    assert {p["spec"]["nodeName"] for p in watch.pods()} == {new["metadata"]["name"]}
    lines = watch.controller_log.read()
    assert matching(lines, "pdb"), "no PDB refusal in the controller log:\n" + "\n".join(lines[-60:])
    assert watch.instances()[old_instance]["state"] in ("terminated", "shutting-down")
    assert "ttlSecondsUntilExpired" not in cluster.kubectl_json("get", "provisioners.karpenter.sh", "default")["spec"]


# 4 --------------------------------------------------------------------------------------
def test_4_scale_to_0_terminates_the_empty_node(watch: Observer, cluster: LocalCluster) -> None:
    [node] = watch.nodes("default")
    iid = instance_id(node["spec"]["providerID"])
    watch.scale("inflate", 0)
    watch.wait_for(lambda: not watch.pods(), 60, "inflate pods to be gone")
    emptied = time.monotonic()
    watch.wait_for(lambda: not watch.nodes("default"), 150, "the empty node to be deleted", interval=1)
    waited = time.monotonic() - emptied
    report(f"empty node deleted {waited:.1f}s after its last pod (ttlSecondsAfterEmpty 30)")
    assert waited >= 25, "the node went before ttlSecondsAfterEmpty elapsed"
    assert watch.instances()[iid]["state"] in ("terminated", "shutting-down")


# 5 --------------------------------------------------------------------------------------
def test_5_deleting_the_provisioner_leaves_nothing_behind(watch: Observer, cluster: LocalCluster) -> None:
    # a node of the Provisioner exists when it is deleted, so the test shows it goes with it
    cluster.kubectl("delete", "pdb", "inflate-pdb")
    watch.scale("inflate", 1)
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 1 and watch.nodes("default"), 120, "a node for 1 inflate pod")
    cluster.kubectl("delete", "provisioners.karpenter.sh", "default")
    watch.wait_for(lambda: not watch.nodes("default"), 120, "the Provisioner's nodes to be deleted")
    watch.wait_for(lambda: not watch.live_instances(), 60, "every instance to be terminated")
    cluster.kubectl("delete", "deployment", "inflate")
    assert cluster.kubectl("get", "provisioners.karpenter.sh", "-o", "name").stdout.strip() == ""
