from __future__ import annotations

from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.cloudprovider.types import NodeRequest
from provisioner.model.labels import API_VERSION, KIND
from provisioner.model.requirements import Requirements

from .conftest import Cluster


def test_crash_between_launch_and_node_creation_leaves_no_instance(cluster: Cluster) -> None:
    cluster.provisioner()
    cluster.settle()
    # the provisioning controller launched, then died before creating the Node
    machine = cluster.cloud.create(NodeRequest(
        id="req-1", provisioner=Provisioner(name="default", spec=ProvisionerSpec()),
        instance_type_options=tuple(cluster.cloud.instance_types[:3]), requirements=Requirements()))
    assert [m.instance_id for m in cluster.cloud.machines] == [machine.instance_id]
    cluster.manager.resync()
    cluster.settle()
    cluster.step(299)
    assert [m.instance_id for m in cluster.cloud.machines] == [machine.instance_id]
    cluster.step(1)
    assert cluster.cloud.machines == []
    assert cluster.cloud.delete_calls == [machine.provider_id]


def test_instance_with_a_node_is_kept(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()
    cluster.manager.resync()
    cluster.step(3600)
    assert [m.provider_id for m in cluster.cloud.machines] == [node["spec"]["providerID"]]
    assert cluster.cloud.delete_calls == []


def test_node_whose_instance_is_gone_is_deleted(cluster: Cluster) -> None:
    cluster.provisioner()
    node = cluster.node()
    keep = cluster.node()
    cluster.cloud.terminate_out_of_band(node["spec"]["providerID"])
    cluster.manager.resync()
    cluster.settle()
    assert cluster.nodes() == [keep["metadata"]["name"]]
    assert "InstanceGone" in cluster.reasons(node["metadata"]["name"])


def test_deleting_a_provisioner_removes_its_nodes(cluster: Cluster) -> None:
    cluster.provisioner("default")
    cluster.provisioner("other")
    a = cluster.node("default")["metadata"]["name"]
    b = cluster.node("default")["metadata"]["name"]
    c = cluster.node("other")["metadata"]["name"]
    cluster.pod("web", a)
    cluster.settle()
    uid = cluster.kube.get("Provisioner", "default")["metadata"]["uid"]
    refs = cluster.kube.get("Node", a)["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": API_VERSION, "kind": KIND, "name": "default", "uid": uid}]
    cluster.kube.delete("Provisioner", "default")
    cluster.settle()
    assert cluster.nodes() == [c]
    assert sorted(m.name for m in cluster.cloud.machines) == [c]
    assert not cluster.exists("Pod", "web", "default")  # drained through the Eviction API
    assert ("evict", "Pod", "web") in cluster.kube.calls
    assert "ProvisionerDeleted" in cluster.reasons(b)


def test_counter_sums_capacity_of_every_resource(cluster: Cluster) -> None:
    cluster.provisioner()
    a = cluster.node(cpu="4", memory="16Gi", pods="58")
    cluster.node(cpu="2500m", memory="8Gi", pods="29")
    cluster.kube.patch("Node", a["metadata"]["name"], {"status": {"capacity": {"nvidia.com/gpu": "1"}}},
                       subresource="status")
    cluster.settle()
    status = cluster.kube.get("Provisioner", "default")["status"]
    assert status["resources"] == {"cpu": "6500m", "memory": "24Gi", "pods": "87", "nvidia.com/gpu": "1"}
    cluster.kube.delete("Node", a["metadata"]["name"])
    cluster.settle()
    status = cluster.kube.get("Provisioner", "default")["status"]
    assert status["resources"] == {"cpu": "2500m", "memory": "8Gi", "pods": "29"}
    patches = [c for c in cluster.kube.calls if c[:2] == ("patch", "Provisioner")]
    cluster.manager.resync()
    cluster.settle()
    assert [c for c in cluster.kube.calls if c[:2] == ("patch", "Provisioner")] == patches  # unchanged: no write


def test_provisioner_deletion_taints_the_node_before_anything_else(cluster: Cluster) -> None:
    """The first write to a node of a deleted Provisioner is the disrupted taint (kube-scheduler honours it).

    Without it, a bare pod bound between the decision and the cordon was evicted at once and lost.
    """
    from provisioner.controllers.termination import termination_reason
    from provisioner.model.labels import DISRUPTED_TAINT_KEY

    cluster.provisioner("default")
    name = cluster.node("default")["metadata"]["name"]
    cluster.settle()
    seen: list[dict[str, object]] = []
    cluster.kube.subscribe(lambda kind, event: seen.append(event.object) if kind == "Node" else None)
    cluster.kube.delete("Provisioner", "default")
    cluster.settle()
    assert cluster.nodes() == []
    mine = [obj for obj in seen if obj["metadata"]["name"] == name]
    first = mine[0]
    assert not first["metadata"].get("deletionTimestamp")
    assert not first["spec"].get("unschedulable")
    assert {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in first["spec"]["taints"]
    assert first["metadata"]["annotations"]["groupless.dev/disruption-reason"] == "provisioner-deleted"
    assert termination_reason(first) == "provisioner_deleted"
    # and it stays tainted until it is gone: expiration (no TTL here) does not lift another's taint
    assert any(obj["metadata"].get("deletionTimestamp") for obj in mine)
    assert all(any(t["key"] == DISRUPTED_TAINT_KEY for t in obj["spec"]["taints"]) for obj in mine)


def test_expiration_does_not_lift_the_taint_of_a_deleted_provisioner(cluster: Cluster) -> None:
    from provisioner.model.labels import DISRUPTED_TAINT_KEY

    cluster.provisioner("default")
    node = cluster.node("default")
    name = node["metadata"]["name"]
    cluster.settle()
    cluster.kube.patch("Node", name, {"metadata": {"annotations": {"groupless.dev/disruption-reason": "provisioner-deleted"}},
                                      "spec": {"taints": [{"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]}})
    cluster.manager.expiration.reconcile(cluster.kube.get("Node", name))
    assert cluster.kube.get("Node", name)["spec"]["taints"] == [{"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]


def test_counter_writes_ready_condition_and_last_scale_time(cluster: Cluster) -> None:
    from provisioner.clock import parse_rfc3339, rfc3339

    cluster.provisioner()
    cluster.settle()
    status = cluster.kube.get("Provisioner", "default")["status"]
    assert status["conditions"] == [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(cluster.clock.now())}]
    assert "lastScaleTime" not in status  # no node launched yet
    ready_since = status["conditions"][0]["lastTransitionTime"]
    cluster.clock.advance(60)
    first = cluster.node()["metadata"]
    cluster.clock.advance(60)
    second = cluster.node()["metadata"]
    cluster.settle()
    status = cluster.kube.get("Provisioner", "default")["status"]
    assert status["lastScaleTime"] == second["creationTimestamp"]
    assert parse_rfc3339(status["lastScaleTime"]) > parse_rfc3339(first["creationTimestamp"])
    assert status["conditions"][0]["lastTransitionTime"] == ready_since  # unchanged status, unchanged time
    # the newest node goes: lastScaleTime is when it last launched, it does not move back
    cluster.kube.delete("Node", second["name"])
    cluster.settle()
    assert cluster.kube.get("Provisioner", "default")["status"]["lastScaleTime"] == second["creationTimestamp"]


def test_counter_marks_an_undecodable_provisioner_not_ready_then_ready_again(cluster: Cluster) -> None:
    from provisioner.clock import rfc3339

    cluster.provisioner()
    cluster.settle()
    cluster.clock.advance(30)
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsAfterEmpty": "soon"}})
    cluster.settle()
    [ready] = cluster.kube.get("Provisioner", "default")["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    assert "ttlSecondsAfterEmpty" in ready["message"]
    assert ready["lastTransitionTime"] == rfc3339(cluster.clock.now())
    cluster.clock.advance(30)
    cluster.kube.patch("Provisioner", "default", {"spec": {"ttlSecondsAfterEmpty": 30}})
    cluster.settle()
    assert cluster.kube.get("Provisioner", "default")["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(cluster.clock.now())}]
