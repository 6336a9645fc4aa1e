from __future__ import annotations

from provisioner.api.labels import API_VERSION, KIND
from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.cloudprovider.types import NodeRequest
from provisioner.scheduling.requirements import Requirements

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
