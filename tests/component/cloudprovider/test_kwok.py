"""The kwok cloud provider against FakeKubeAPI: instances are Nodes, so a restarted provider sees every launch.

Launches go through the provisioning controller, as in production (it creates the Node right
after ``create`` returns); the provider's own verbs are then checked on the Nodes it wrote.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from provisioner.api.defaults import default_provisioner
from provisioner.api.schemas import load_provisioner
from provisioner.app.controller import build_cloud_provider
from provisioner.clock import FakeClock, rfc3339
from provisioner.cloudprovider import kwok
from provisioner.cloudprovider.catalogfiles import CatalogFileError
from provisioner.cloudprovider.kwok import MAX_SPENT_NAMES, KwokCloudProvider, load_catalog, node_name
from provisioner.cloudprovider.offerings import UNAVAILABLE_OFFERING_TTL_SECONDS
from provisioner.cloudprovider.types import (
    InsufficientCapacityError,
    LaunchError,
    NodeRequest,
    NotFoundError,
)
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.api import ApiError
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.model.resources import MIB
from provisioner.settings import ProvisioningSettings, SettingsError, from_mapping
from provisioner.state import ClusterState
from tests.component.provisioning.harness import walkthrough

PLAN_FIXTURES = Path(__file__).resolve().parents[2] / "unit" / "plan" / "fixtures"


class KwokCluster:
    """FakeKubeAPI + cluster state + the provisioning controller over a KwokCloudProvider."""

    def __init__(self, provisioner=None):
        self.clock = FakeClock()
        self.api = FakeKubeAPI(self.clock)
        self.cloud = KwokCloudProvider(self.api, clock=self.clock)
        self.state = ClusterState(self.api, self.clock)
        self.provisioner = self.api.create("Provisioner", provisioner or walkthrough("01-provisioner.yaml"))
        self.state.resync()
        self.api.subscribe(self.state.handle)
        self.controller = ProvisioningController(
            self.api, self.state, self.cloud, self.clock,
            EventRecorder(self.api, clock=self.clock, instance="test"), ProvisioningSettings(),
        )
        self.controller.watch_state()
        self._n = 0

    def pending_pod(self, cpu="1", node_selector=None):
        template = copy.deepcopy(walkthrough("02-inflate-deployment.yaml")["spec"]["template"])
        if node_selector is not None:
            template["spec"]["nodeSelector"] = node_selector
        template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        self._n += 1
        meta = {**template["metadata"], "name": f"inflate-{self._n:05d}", "namespace": "default"}
        return self.api.create("Pod", {"metadata": meta, "spec": template["spec"], "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})

    def provision(self, pods):
        """One batch of the provisioning loop over ``pods`` (opened by them, closed after 1 s idle)."""
        batcher = self.controller.batcher
        assert pods and batcher.take() is None  # the window is open, not closed yet
        self.clock.advance(1.0)
        batch = batcher.take()
        assert batch is not None
        result = self.controller.reconcile(batch)
        assert not result.failed, result
        return result

    def nodes(self):
        return self.api.list("Node")[0]


def provisioner_object(name="default", **spec):
    obj = copy.deepcopy(walkthrough("01-provisioner.yaml"))
    obj["metadata"]["name"] = name
    obj["spec"].update(spec)
    return obj


def request(provisioner_obj=None, types=("m5.large", "m6g.large"), requirements=None, request_id="nr-test-1"):
    """A NodeRequest over the default catalog's types, as the controller builds one."""
    provisioner = load_provisioner(default_provisioner(provisioner_obj or provisioner_object()))
    catalog = {t.name: t for t in KwokCloudProvider(FakeKubeAPI()).get_instance_types(provisioner)}
    return NodeRequest(
        id=request_id, provisioner=provisioner, instance_type_options=tuple(catalog[n] for n in types),
        requirements=requirements or Requirements(),
    )


# ----------------------------------------------------------------------------- catalog
def test_default_catalog_has_both_architectures_three_zones_and_both_capacity_types():
    catalog = load_catalog()
    assert catalog.region == "ap-south-1"
    assert catalog.zones == ["ap-south-1a", "ap-south-1b", "ap-south-1c"]
    provisioner = load_provisioner(default_provisioner(provisioner_object()))
    types = {t.name: t for t in KwokCloudProvider(FakeKubeAPI(), catalog).get_instance_types(provisioner)}
    assert len(types) == 42
    assert sum(t.arch == "arm64" for t in types.values()) == 20
    assert sum(t.arch == "amd64" for t in types.values()) == 22
    # the walkthrough's type, with the AWS model's capacity and allocatable (aws/catalog.py docstring)
    r6gd = types["r6gd.xlarge"]
    assert (r6gd.capacity.get("cpu"), r6gd.capacity.get("memory") // MIB, r6gd.capacity.get("pods")) == (4000, 30310, 58)
    assert (r6gd.allocatable.get("cpu"), r6gd.allocatable.get("memory") // MIB) == (3820, 29217)
    prices = {(o.zone, o.capacity_type): o.price for o in types["m5.large"].offerings}
    assert prices == {(z, ct): p for z in catalog.zones for ct, p in (("on-demand", 0.09984), ("spot", 0.03999))}
    assert types["g4dn.xlarge"].capacity.get("nvidia.com/gpu") == 1
    assert types["inf1.xlarge"].capacity.get("aws.amazon.com/neuron") == 1


def test_catalog_files_in_the_describe_shape_replace_the_default_and_name_their_region():
    catalog = load_catalog(f"{PLAN_FIXTURES}/instance-types.json", f"{PLAN_FIXTURES}/offerings.json")
    assert catalog.region == "ap-south-1"
    assert {t["InstanceType"] for t in catalog.instance_types} == {
        t["InstanceType"] for t in json.load(open(f"{PLAN_FIXTURES}/instance-types.json"))["InstanceTypes"]}


def test_instance_types_without_offerings_are_offered_in_the_default_zones(tmp_path):
    only = tmp_path / "types.json"
    only.write_text(json.dumps([t for t in json.load(open(kwok.DEFAULT_INSTANCE_TYPES))["InstanceTypes"]
                                if t["InstanceType"] == "m5.large"]))
    provisioner = load_provisioner(default_provisioner(provisioner_object()))
    (m5,) = KwokCloudProvider(FakeKubeAPI(), load_catalog(only)).get_instance_types(provisioner)
    assert sorted({o.zone for o in m5.offerings}) == ["ap-south-1a", "ap-south-1b", "ap-south-1c"]


def test_bad_catalog_files_are_refused_naming_the_file(tmp_path):
    broken = tmp_path / "types.json"
    broken.write_text("{")
    with pytest.raises(CatalogFileError, match=rf"^{broken}: not valid JSON"):
        load_catalog(broken)
    mixed = tmp_path / "offerings.json"
    mixed.write_text(json.dumps({"InstanceTypeOfferings": [
        {"InstanceType": "m5.large", "Location": "ap-south-1a"}, {"InstanceType": "m5.large", "Location": "eu-west-1a"}]}))
    with pytest.raises(CatalogFileError, match=r"cannot tell the region .*\(ap-south-1, eu-west-1\): a kwok catalog"):
        load_catalog(None, mixed)
    empty = tmp_path / "none.json"
    empty.write_text('{"InstanceTypeOfferings": []}')
    with pytest.raises(CatalogFileError, match=rf"^{empty}: no offerings"):
        load_catalog(None, empty)


# ----------------------------------------------------------------------------- launches through the controller
def test_a_launch_is_a_node_with_a_kwok_provider_id_that_kwok_manages():
    cluster = KwokCluster()
    pods = [cluster.pending_pod() for _ in range(3)]
    result = cluster.provision(pods)

    (node,) = cluster.nodes()
    name = node["metadata"]["name"]
    assert result.nodes == (name,)
    assert name.startswith("kwok-") and len(name) == len("kwok-") + 16
    assert node["spec"]["providerID"] == f"kwok://{name}"
    labels, annotations = node["metadata"]["labels"], node["metadata"]["annotations"]
    # the walkthrough's pinned offering: r6gd.xlarge on-demand in ap-south-1a
    assert (labels[wk.INSTANCE_TYPE], labels[wk.ZONE], labels[wk.CAPACITY_TYPE], labels[wk.ARCH]) == (
        "r6gd.xlarge", "ap-south-1a", "on-demand", "arm64")
    assert labels["kwok.x-k8s.io/node"] == "fake"
    assert annotations["kwok.x-k8s.io/node"] == "fake"
    assert labels[wk.NODE_REQUEST_TAG].startswith("nr-")
    assert annotations[wk.PRICE_ANNOTATION] == "0.239620"
    assert node["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert node["status"]["capacity"]["memory"] == "30310Mi"
    assert set(json.loads(annotations[wk.NOMINATIONS_ANNOTATION])["pods"]) == {p["metadata"]["uid"] for p in pods}

    (machine,) = cluster.cloud.list()
    assert (machine.provider_id, machine.instance_id, machine.name) == (f"kwok://{name}", name, name)
    assert (machine.instance_type, machine.zone, machine.capacity_type) == ("r6gd.xlarge", "ap-south-1a", "on-demand")
    assert machine.provisioner_name == "default"
    assert machine.node_request_id == labels[wk.NODE_REQUEST_TAG]
    assert machine.launch_time == node["metadata"]["creationTimestamp"]
    assert cluster.cloud.get(machine.provider_id) == machine


def test_a_restarted_provider_sees_every_earlier_launch():
    cluster = KwokCluster()
    cluster.provision([cluster.pending_pod() for _ in range(2)])
    cluster.provision([cluster.pending_pod(cpu="3", node_selector={wk.ARCH: "amd64"})])
    launched = cluster.cloud.list()
    assert len(launched) == 2 and {m.instance_type for m in launched} != {"r6gd.xlarge"}

    restarted = KwokCloudProvider(cluster.api, clock=FakeClock())
    assert restarted.list() == launched
    for machine in launched:
        assert restarted.get(machine.provider_id) == machine
    # Nodes that are not kwok instances of ours are not listed
    cluster.api.create("Node", {"metadata": {"name": "control-plane", "labels": {}}, "spec": {}})
    cluster.api.create("Node", {"metadata": {"name": "ip-10-0-0-1", "labels": {wk.PROVISIONER_NAME: "default"}},
                                "spec": {"providerID": "aws:///ap-south-1a/i-0123456789abcdef0"}})
    assert restarted.list() == launched


def test_create_is_idempotent_per_request_id_before_and_after_the_node_exists():
    cluster = KwokCluster()
    req = request()
    first = cluster.cloud.create(req)
    again = cluster.cloud.create(req)
    assert again == first
    assert first.name == node_name(req.id)
    # the cheaper option's cheapest offering: m6g.large spot (0.03258) below m5.large spot (0.03999)
    assert (first.instance_type, first.capacity_type, first.zone) == ("m6g.large", "spot", "ap-south-1a")
    assert cluster.nodes() == []  # the provider writes nothing; the controller writes the Node

    cluster.api.create("Node", {
        "metadata": {"name": first.name, "labels": {**first.labels, wk.PROVISIONER_NAME: "default"}},
        "spec": {"providerID": first.provider_id},
    })
    cluster.clock.advance(30)
    after = cluster.cloud.create(req)
    restarted = KwokCloudProvider(cluster.api, clock=cluster.clock).create(req)
    assert after == restarted
    assert (after.provider_id, after.instance_type, after.zone, after.capacity_type, after.node_request_id) == (
        first.provider_id, "m6g.large", "ap-south-1a", "spot", req.id)
    assert after.launch_time == first.launch_time  # the Node's creation, not the retry's time
    assert [n["metadata"]["name"] for n in cluster.nodes()] == [first.name]
    assert cluster.cloud.create(request(request_id="nr-test-2")).name != first.name


def being_deleted(cluster, machine):
    """``machine``'s Node, held by the termination finalizer while it is deleted."""
    cluster.api.create("Node", {
        "metadata": {"name": machine.name, "labels": dict(machine.labels), "finalizers": ["karpenter.sh/termination"]},
        "spec": {"providerID": machine.provider_id},
    })
    cluster.api.delete("Node", machine.name)


def test_a_request_whose_node_is_being_deleted_launches_under_the_next_name_of_its_chain():
    cluster = KwokCluster()
    req = request()
    first = cluster.cloud.create(req)
    being_deleted(cluster, first)
    second = cluster.cloud.create(req)
    assert second.name == node_name(req.id, [first.name]) != first.name
    assert second.node_request_id == req.id
    # a retried create walks the same chain and finds the second instance
    assert cluster.cloud.create(req).provider_id == second.provider_id
    # the chain has an end: with every name of it being deleted, the create is refused until one is gone
    names = [first.name, second.name]
    being_deleted(cluster, second)
    while len(names) <= MAX_SPENT_NAMES:
        machine = cluster.cloud.create(req)
        assert machine.name == node_name(req.id, names)
        names.append(machine.name)
        being_deleted(cluster, machine)
    with pytest.raises(LaunchError, match=rf"nodes {', '.join(names)} of node request {req.id} are still being deleted"):
        cluster.cloud.create(req)


def test_create_refuses_a_name_taken_by_another_instance():
    cluster = KwokCluster()
    other = request(request_id="nr-test-3")
    cluster.api.create("Node", {"metadata": {"name": node_name(other.id)}, "spec": {"providerID": "aws:///x/i-1"}})
    with pytest.raises(LaunchError, match="exists and is not its kwok instance"):
        cluster.cloud.create(other)


# ----------------------------------------------------------------------------- get / delete
def test_delete_deletes_the_node_through_its_finalizer_and_is_idempotent():
    cluster = KwokCluster()
    cluster.provision([cluster.pending_pod()])
    (machine,) = cluster.cloud.list()

    cluster.cloud.delete(machine.provider_id)
    (node,) = cluster.nodes()  # held by karpenter.sh/termination until the termination controller drains it
    assert node["metadata"]["deletionTimestamp"] == rfc3339(cluster.clock.now())
    with pytest.raises(NotFoundError, match="being deleted"):
        cluster.cloud.get(machine.provider_id)
    assert cluster.cloud.list() == []
    assert [c for c in cluster.api.calls if c[:2] == ("delete", "Node")] == [("delete", "Node", machine.name)]
    cluster.cloud.delete(machine.provider_id)  # already terminating: success, no second delete
    assert [c for c in cluster.api.calls if c[:2] == ("delete", "Node")] == [("delete", "Node", machine.name)]

    cluster.api.patch("Node", machine.name, {"metadata": {"finalizers": None}})
    assert cluster.nodes() == []
    cluster.cloud.delete(machine.provider_id)  # gone: success
    with pytest.raises(NotFoundError, match=rf"instance {machine.name} not found"):
        cluster.cloud.get(machine.provider_id)


def test_other_provider_ids_are_never_kwok_instances():
    cluster = KwokCluster()
    aws_node = {"metadata": {"name": "ip-10-0-0-1"}, "spec": {"providerID": "aws:///ap-south-1a/i-0123"}}
    cluster.api.create("Node", aws_node)
    cluster.cloud.delete("aws:///ap-south-1a/i-0123")
    cluster.cloud.delete("kwok://ip-10-0-0-1")  # a Node of that name with another providerID is not ours
    assert [n["metadata"]["name"] for n in cluster.nodes()] == ["ip-10-0-0-1"]
    assert "deletionTimestamp" not in cluster.nodes()[0]["metadata"]
    with pytest.raises(NotFoundError, match="not a kwok provider ID"):
        cluster.cloud.get("aws:///ap-south-1a/i-0123")
    with pytest.raises(NotFoundError, match="has providerID 'aws:///ap-south-1a/i-0123'"):
        cluster.cloud.get("kwok://ip-10-0-0-1")


# ----------------------------------------------------------------------------- insufficient capacity
def test_insufficient_capacity_falls_back_then_fails_naming_the_offerings_and_marks_them_unavailable():
    cluster = KwokCluster()
    req = request(types=("m6g.large",))
    cluster.cloud.insufficient_capacity = {("m6g.large", "ap-south-1a", "spot"), ("m6g.large", "ap-south-1b", "spot")}
    machine = cluster.cloud.create(req)
    assert (machine.instance_type, machine.zone, machine.capacity_type) == ("m6g.large", "ap-south-1c", "spot")
    provisioner = req.provisioner
    unavailable = {(t.name, o.zone, o.capacity_type) for t in cluster.cloud.get_instance_types(provisioner)
                   for o in t.offerings if not o.available}
    assert unavailable == {("m6g.large", "ap-south-1a", "spot"), ("m6g.large", "ap-south-1b", "spot")}

    cluster.cloud.insufficient_capacity.add(("m6g.large", "ap-south-1c", "spot"))
    with pytest.raises(InsufficientCapacityError) as raised:
        cluster.cloud.create(request(types=("m6g.large",), request_id="nr-test-4"))
    assert raised.value.offerings == (("m6g.large", "ap-south-1c", "spot"),)
    assert "m6g.large/ap-south-1c/spot" in str(raised.value)
    # every spot offering is unavailable now: the next request gets on-demand, as on AWS
    fallback = cluster.cloud.create(request(types=("m6g.large",), request_id="nr-test-5"))
    assert (fallback.capacity_type, fallback.zone) == ("on-demand", "ap-south-1a")

    cluster.clock.advance(UNAVAILABLE_OFFERING_TTL_SECONDS + 1)
    cluster.cloud.insufficient_capacity.clear()
    assert all(o.available for t in cluster.cloud.get_instance_types(provisioner) for o in t.offerings)


def test_through_the_controller_failed_offerings_are_skipped_and_stay_unavailable():
    cluster = KwokCluster()
    arm64 = [t.name for t in cluster.cloud.get_instance_types(load_provisioner(default_provisioner(
        provisioner_object()))) if t.arch == "arm64"]
    blocked = {(name, zone, "on-demand") for name in arm64 for zone in ("ap-south-1a", "ap-south-1b")}
    cluster.cloud.insufficient_capacity = blocked
    pod = cluster.pending_pod(node_selector={wk.CAPACITY_TYPE: "on-demand", wk.ARCH: "arm64"})
    cluster.provision([pod])
    (node,) = cluster.nodes()
    labels = node["metadata"]["labels"]
    assert (labels[wk.ZONE], labels[wk.CAPACITY_TYPE], labels[wk.ARCH]) == ("ap-south-1c", "on-demand", "arm64")
    # the cheaper offerings tried first are in the ICE cache now
    launched_type = labels[wk.INSTANCE_TYPE]
    assert {(launched_type, "ap-south-1a", "on-demand"), (launched_type, "ap-south-1b", "on-demand")} <= (
        cluster.cloud.unavailable.snapshot())


def test_api_failures_are_cloud_provider_errors():
    cluster = KwokCluster()
    cluster.api.fail_next[("get", "Node")] = [ApiError(500, "InternalError", "etcd unavailable")]
    with pytest.raises(LaunchError, match="reading node kwok-.*: 500 InternalError: etcd unavailable"):
        cluster.cloud.create(request())
    cluster.api.fail_next[("list", "Node")] = [ApiError(503, "ServiceUnavailable", "")]
    with pytest.raises(LaunchError, match="listing kwok instances"):
        cluster.cloud.list()


# ----------------------------------------------------------------------------- wiring
def test_groupless_controller_builds_the_kwok_provider_from_its_settings():
    api = FakeKubeAPI()
    settings = from_mapping({"cloud_provider": "kwok", "instance_types": f"{PLAN_FIXTURES}/instance-types.json",
                             "offerings": f"{PLAN_FIXTURES}/offerings.json", "eni_limited_pod_density": "false"})
    cloud = build_cloud_provider(settings, FakeClock(), api)
    assert isinstance(cloud, KwokCloudProvider)
    assert cloud.kube is api
    provisioner = load_provisioner(default_provisioner(provisioner_object()))
    types = cloud.get_instance_types(provisioner)
    assert {t.name for t in types} == {t["InstanceType"] for t in cloud.catalog.instance_types}
    assert {t.capacity.get("pods") for t in types} == {110}

    env = from_mapping({}, {"GROUPLESS_CLOUD_PROVIDER": "kwok"})
    assert isinstance(build_cloud_provider(env, FakeClock(), api), KwokCloudProvider)
    with pytest.raises(SettingsError, match="needs the Kubernetes API"):
        build_cloud_provider(env, FakeClock(), None)


def test_catalog_files_are_refused_for_other_cloud_providers():
    with pytest.raises(SettingsError, match="apply to --cloud-provider kwok only, not aws"):
        from_mapping({"cloud_provider": "aws", "instance_types": "types.json"})
    with pytest.raises(SettingsError, match="GROUPLESS_OFFERINGS"):
        from_mapping({}, {"GROUPLESS_OFFERINGS": "offerings.json"})
