"""Pods kube-scheduler has not tried yet: provisioned for once it is backlogged past the grace.

A burst of pods on a loaded API server keeps kube-scheduler busy for minutes: every failed
attempt waits for its status PATCH. Waiting for its verdict on each pod delays their nodes by
that much; a pod it has not tried 5 s after its creation is provisioned for anyway, and when
kube-scheduler reaches it its node is there.
"""

import json

from provisioner.model import labels as wk
from provisioner.settings import Batching, NodeDefaults, ProvisioningSettings

from .harness import Cluster


def untried_pod(cluster, name):
    """A pod as the ReplicaSet controller creates it: kube-scheduler has not looked at it (no PodScheduled)."""
    pod = cluster.pending_pod(name=name)
    pod["status"] = {"phase": "Pending"}
    return cluster.api.replace("Pod", pod, subresource="status")


def with_grace(seconds):
    """The harness's settings with ``--untried-pod-grace`` set (5 s by default)."""
    return ProvisioningSettings(batching=Batching(untried_grace_seconds=seconds),
                                nodes=NodeDefaults(annotations={"kwok.x-k8s.io/node": "fake"}))


def test_an_untried_pod_is_provisioned_for_after_the_grace():
    cluster = Cluster(with_grace(5.0))
    pod = untried_pod(cluster, "burst-1")

    assert cluster.controller.reconcile().pods == 0  # kube-scheduler may still try it: nothing yet
    assert cluster.nodes() == []

    cluster.clock.advance(5.0)
    result = cluster.controller.reconcile()
    assert result.pods == 1
    (node,) = cluster.nodes()
    assert sorted(json.loads(node["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION])["pods"]) == [
        pod["metadata"]["uid"]]


def test_a_change_to_an_untried_pod_past_the_grace_opens_a_window():
    cluster = Cluster(with_grace(5.0))
    pod = cluster.pending_pod(name="burst-1")
    cluster.controller.batcher.flush()  # the harness creates pods marked Unschedulable: forget that window
    pod["status"] = {"phase": "Pending"}
    pod = cluster.api.replace("Pod", pod, subresource="status")
    assert not cluster.controller.batcher.is_open()  # an untried pod younger than the grace is not a reason yet

    cluster.clock.advance(5.0)
    cluster.api.patch("Pod", pod["metadata"]["name"], {"metadata": {"labels": {"seen": "yes"}}}, "default")
    assert cluster.controller.batcher.is_open()


def test_untried_pods_wait_for_kube_scheduler_with_the_grace_off():
    cluster = Cluster(with_grace(0.0))
    untried_pod(cluster, "burst-1")
    cluster.clock.advance(600.0)
    assert cluster.controller.reconcile().pods == 0
    assert cluster.nodes() == []


def test_the_default_grace_is_five_seconds():
    assert ProvisioningSettings().batching.untried_grace == 5.0
    cluster = Cluster()  # the harness's defaults
    untried_pod(cluster, "burst-1")
    cluster.clock.advance(4.9)
    assert cluster.controller.reconcile().pods == 0
    cluster.clock.advance(0.1)
    assert cluster.controller.reconcile().pods == 1
    assert len(cluster.nodes()) == 1
