import json
import logging

from provisioner.clock import parse_rfc3339
from provisioner.model import labels as wk
from provisioner.model.nominations import BIND_GRACE_SECONDS


def test_three_inflate_pods_launch_one_node(cluster, caplog):
    caplog.set_level(logging.INFO)
    pods = [cluster.pending_pod() for _ in range(3)]
    # the batch window: opened by the first pod, closed after 1 s idle
    assert cluster.controller.batcher.take() is None
    cluster.clock.advance(1.0)
    batch = cluster.controller.batcher.take()
    assert batch is not None
    result = cluster.controller.reconcile(batch)

    assert len(cluster.cloud.create_calls) == 1
    request = cluster.cloud.create_calls[0]
    assert [t.name for t in request.instance_type_options] == ["r6gd.xlarge"]
    assert request.provisioner.name == "default"
    assert request.labels[wk.PROVISIONER_NAME] == "default"

    (node,) = cluster.nodes()
    machine = cluster.cloud.launches[0]
    assert result.nodes == (machine.name,)
    meta = node["metadata"]
    assert meta["name"] == machine.name
    labels = meta["labels"]
    assert labels[wk.PROVISIONER_NAME] == "default"
    assert labels[wk.INSTANCE_TYPE] == "r6gd.xlarge"
    assert labels[wk.ZONE] == "ap-south-1a"
    assert labels[wk.CAPACITY_TYPE] == "on-demand"
    assert labels[wk.ARCH] == "arm64"
    assert labels[wk.OS] == "linux"
    assert node["spec"]["taints"] == [{"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}]
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    assert node["spec"]["providerID"] == machine.provider_id
    assert node["spec"]["providerID"].startswith("aws:///ap-south-1a/i-")
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "name": "default",
            "uid": cluster.provisioner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]
    assert node["status"]["capacity"] == {
        "cpu": "4",
        "ephemeral-storage": "20Gi",
        "memory": "30310Mi",
        "pods": "58",
    }
    assert node["status"]["allocatable"]["cpu"] == "3820m"
    assert node["status"]["allocatable"]["memory"] == "29217Mi"
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
    # the on-demand ap-south-1a offering's price, for the extender's price score
    assert meta["annotations"][wk.PRICE_ANNOTATION] == "0.230400"

    nominations = json.loads(meta["annotations"][wk.NOMINATIONS_ANNOTATION])
    assert set(nominations["pods"]) == {p["metadata"]["uid"] for p in pods}
    first = pods[0]
    assert nominations["pods"][first["metadata"]["uid"]] == {
        "pod": f"default/{first['metadata']['name']}",
        "requests": {"cpu": 1000, "pods": 1},
    }
    # deadline: launch + registration timeout (900 s) + nomination TTL (300 s)
    assert parse_rfc3339(nominations["deadline"]) == cluster.clock.now() + 1200

    events = cluster.api.events(reason="Nominated")
    assert sorted(e["involvedObject"]["name"] for e in events) == sorted(p["metadata"]["name"] for p in pods)
    assert {e["message"] for e in events} == {
        f"Pod should schedule on node {machine.name} (r6gd.xlarge, ap-south-1a)"
    }
    (launched,) = cluster.api.events(reason="Launched")
    assert launched["involvedObject"]["kind"] == "Provisioner"
    assert (
        launched["message"]
        == f"Launched node {machine.name} (r6gd.xlarge, ap-south-1a, on-demand) for 3 pod(s)"
    )

    text = caplog.text
    assert "Batched 3 pods in 1s" in text
    assert "Computed packing of 1 node(s) for 3 pod(s) with instance type option(s) [r6gd.xlarge]" in text
    assert (
        f"Launched instance: {machine.instance_id}, hostname: {machine.name}, type: r6gd.xlarge, "
        "zone: ap-south-1a, capacityType: on-demand"
    ) in text


def test_second_burst_fits_the_in_flight_node(cluster):
    for _ in range(3):
        cluster.pending_pod()
    cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 1
    node_name = cluster.nodes()[0]["metadata"]["name"]

    # the first pods are nominated: nothing more is launched for them
    again = cluster.controller.reconcile()
    assert again.pods == 0 and len(cluster.cloud.create_calls) == 1

    # a 400m pod fits the in-flight node's remaining 820m (3820m - 3 x 1000m)
    late = cluster.pending_pod(cpu="400m")
    result = cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 1
    assert result.nominated_existing == {node_name: (late["metadata"]["uid"],)}
    annotation = json.loads(
        cluster.api.get("Node", node_name)["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION]
    )
    assert late["metadata"]["uid"] in annotation["pods"] and len(annotation["pods"]) == 4
    # and a pod that does not fit (another full core) gets a node of its own
    cluster.pending_pod()
    cluster.controller.reconcile()
    assert len(cluster.cloud.create_calls) == 2


def test_nominations_are_pruned_when_pods_bind(cluster):
    pods = [cluster.pending_pod() for _ in range(2)]
    cluster.controller.reconcile()
    name = cluster.nodes()[0]["metadata"]["name"]
    cluster.api.bind(pods[0]["metadata"]["name"], "default", name)
    both = sorted(p["metadata"]["uid"] for p in pods)
    cluster.controller.reconcile()

    def nominated():
        node = cluster.api.get("Node", name)
        return sorted(json.loads(node["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION])["pods"])

    # the bound pod's entry outlives the binding by BIND_GRACE_SECONDS, so that an extender
    # that sees the annotation before the binding still counts the pod somewhere
    assert nominated() == both
    cluster.clock.advance(BIND_GRACE_SECONDS)
    writes = cluster.api.calls.count(("patch", "Node", name))
    cluster.controller.reconcile()
    # past the grace the bound pod's entry holds no room for any reader; it goes with the last
    # one, so no Node update (every watcher's event) is spent on it
    assert nominated() == both
    assert cluster.api.calls.count(("patch", "Node", name)) == writes
    cluster.api.delete("Pod", pods[1]["metadata"]["name"])
    cluster.controller.reconcile()
    assert wk.NOMINATIONS_ANNOTATION not in cluster.api.get("Node", name)["metadata"]["annotations"]
    assert cluster.api.calls.count(("patch", "Node", name)) == writes + 1


def test_pods_of_an_expired_nomination_are_provisionable_again(cluster):
    pods = [cluster.pending_pod() for _ in range(2)]
    cluster.controller.reconcile()
    (node,) = cluster.nodes()
    name = node["metadata"]["name"]
    cluster.clock.advance(1201)  # the node never became Ready: the reservation ended
    result = cluster.controller.reconcile()
    # the in-flight node still has room: the pods are nominated to it again, with a new deadline
    assert len(cluster.cloud.create_calls) == 1
    assert sorted(result.nominated_existing[name]) == sorted(p["metadata"]["uid"] for p in pods)
    annotation = json.loads(
        cluster.api.get("Node", name)["metadata"]["annotations"][wk.NOMINATIONS_ANNOTATION]
    )
    assert parse_rfc3339(annotation["deadline"]) == cluster.clock.now() + 1200
    # once that node is gone (registration failed, deleted), a new node is launched for them
    cluster.cloud.delete(node["spec"]["providerID"])  # what the termination controller does
    cluster.api.patch("Node", name, {"metadata": {"finalizers": None}})
    cluster.api.delete("Node", name)
    result = cluster.controller.reconcile()
    assert len(result.nodes) == 1 and result.nodes[0] != name
    assert len(cluster.cloud.create_calls) == 2


def test_a_bound_pod_in_its_nomination_grace_is_not_counted_twice(cluster):
    # r6gd.xlarge: 3.82 cpu allocatable, launched for two 1-cpu pods; one binds. Room left:
    # 3.82 - 1 (bound) - 1 (still nominated) = 1.82, so a third 1-cpu pod joins the node. Counting
    # the bound pod's lingering nomination as well would leave 0.82 and launch a second node.
    pods = [cluster.pending_pod() for _ in range(2)]
    (name,) = cluster.controller.reconcile().nodes
    cluster.api.bind(pods[0]["metadata"]["name"], "default", name)
    cluster.controller.reconcile()
    third = cluster.pending_pod()
    result = cluster.controller.reconcile()
    assert result.nodes == ()
    assert dict(result.nominated_existing) == {name: (third["metadata"]["uid"],)}
    assert len(cluster.cloud.create_calls) == 1
