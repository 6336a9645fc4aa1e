"""Pods planned again after their node's nominations ended get a new node, not the old one back.

A node request's id is stable for its Provisioner and pods, and the cloud provider answers an id
it has seen with the instance it launched then (EC2's ClientToken; the fake and kwok providers
alike). When the nominations of a node expire and other pods fill it, the same pods planned
again made the same request: the provider handed the full node back, the pods were recorded on
their way to it without a reservation there, and no round launched for them until that record
ran out (20 minutes): they stayed Pending with room nowhere.
"""

import json

from provisioner.model import labels as wk

from .harness import Cluster


def nominated(cluster, node_name):
    raw = cluster.api.get("Node", node_name)["metadata"].get("annotations", {}).get(wk.NOMINATIONS_ANNOTATION)
    return sorted(json.loads(raw)["pods"]) if raw else []


def test_pods_whose_nominations_expired_on_a_node_others_filled_get_a_new_node():
    cluster = Cluster()
    pods = [cluster.pending_pod(cpu="1"), cluster.pending_pod(cpu="1")]
    uids = sorted(p["metadata"]["uid"] for p in pods)
    first = cluster.controller.reconcile()
    (old,) = first.nodes
    assert nominated(cluster, old) == uids
    old_request = cluster.api.get("Node", old)["metadata"]["annotations"][wk.NODE_REQUEST_TAG]
    assert old_request == first.launched[0].machine.node_request_id

    # the nominations run out (launch + registration timeout + TTL), then another pod fills the node
    cluster.clock.advance(1200)
    filler = cluster.pending_pod(cpu="3")
    cluster.api.patch("Pod", filler["metadata"]["name"], {"spec": {"nodeName": old}}, "default")

    again = cluster.controller.reconcile()

    assert len(again.nodes) == 1 and again.nodes[0] != old
    assert nominated(cluster, again.nodes[0]) == uids
    assert again.launched[0].machine.node_request_id != old_request
    assert len(cluster.cloud.create_calls) == 2
    assert cluster.controller.provisioner.provisionable(cluster.state.snapshot()) == []



def test_pods_planned_a_third_time_skip_both_earlier_nodes():
    cluster = Cluster()
    pods = [cluster.pending_pod(cpu="1"), cluster.pending_pod(cpu="1")]
    uids = sorted(p["metadata"]["uid"] for p in pods)
    launched = []
    for _ in range(3):
        result = cluster.controller.reconcile()
        (node,) = result.nodes
        assert nominated(cluster, node) == uids
        launched.append((node, result.launched[0].machine.node_request_id))
        # the nominations run out, then another pod fills the node
        cluster.clock.advance(1200)
        filler = cluster.pending_pod(cpu="3")
        cluster.api.patch("Pod", filler["metadata"]["name"], {"spec": {"nodeName": node}}, "default")

    assert len({node for node, _ in launched}) == 3
    assert len({request for _, request in launched}) == 3
    assert len(cluster.cloud.create_calls) == 3


def test_a_node_being_deleted_does_not_change_the_request():
    """The providers launch anew for an id whose instance is going: the request keeps its id."""
    cluster = Cluster()
    cluster.pending_pod(cpu="1")
    first = cluster.controller.reconcile()
    (old,) = first.nodes
    cluster.clock.advance(1200)
    filler = cluster.pending_pod(cpu="3")
    cluster.api.patch("Pod", filler["metadata"]["name"], {"spec": {"nodeName": old}}, "default")
    cluster.api.delete("Node", old)  # held by the termination finalizer: being deleted
    assert cluster.api.get("Node", old)["metadata"]["deletionTimestamp"]

    cluster.controller.reconcile()

    first_request, second_request = cluster.cloud.create_calls
    assert second_request.id == first_request.id == first.launched[0].machine.node_request_id
