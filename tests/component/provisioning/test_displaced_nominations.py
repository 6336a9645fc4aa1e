"""A nomination its node can no longer honour ends, and the pod gets capacity again.

The case: kube-scheduler binds other pods onto a node launched (and nominated) for a
1-cpu/2Gi pod, so the pod fits nowhere; were its nomination kept (5 minutes), the controller
would launch nothing for it all that time.
"""

import json

from provisioner.model import labels as wk

from .harness import Cluster


def bind(cluster, pod, node_name):
    """What kube-scheduler's binding does to a pod, as the cache sees it."""
    cluster.api.patch("Pod", pod["metadata"]["name"], {"spec": {"nodeName": node_name}}, "default")


def nominated(cluster, node_name):
    raw = cluster.api.get("Node", node_name)["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
    return sorted(json.loads(raw)["pods"]) if raw else []


def test_a_pod_whose_nominated_node_was_filled_by_others_gets_a_new_node():
    cluster = Cluster()
    pod = cluster.pending_pod(cpu="1")
    first = cluster.controller.reconcile()
    (node,) = cluster.nodes()
    name = node["metadata"]["name"]
    assert first.launched[0].pod_uids == (pod["metadata"]["uid"],)
    assert nominated(cluster, name) == [pod["metadata"]["uid"]]
    allocatable_cpu = node["status"]["allocatable"]["cpu"]

    # other pods take the node's room before the nominated pod binds (the cpu left is < 1000m)
    other = cluster.pending_pod(cpu="2900m")
    bind(cluster, other, name)
    again = cluster.controller.reconcile()

    assert nominated(cluster, name) == [], allocatable_cpu  # 3820m - 2900m < 1000m
    assert len(again.nodes) == 1 and again.nodes[0] != name  # a new node, not the full one again
    assert again.launched[0].pod_uids == (pod["metadata"]["uid"],)
    assert nominated(cluster, again.nodes[0]) == [pod["metadata"]["uid"]]


def test_a_nomination_that_still_fits_beside_the_bound_pods_holds():
    cluster = Cluster()
    pod = cluster.pending_pod(cpu="1")
    cluster.controller.reconcile()
    (node,) = cluster.nodes()
    name = node["metadata"]["name"]

    other = cluster.pending_pod(cpu="2")
    bind(cluster, other, name)
    again = cluster.controller.reconcile()

    assert again.nodes == ()
    assert nominated(cluster, name) == [pod["metadata"]["uid"]]
