"""The instance tags adoption reads, on a moto server: what CreateFleet writes, what list() finds, a Node written from them;
and a launch sent again after its instance was terminated (EC2's ClientToken answers, played by the fault proxy).

Each test uses its own cluster name, so the shared account's other instances stay out of its listing.
"""

import uuid

import boto3
import pytest

from localcluster.aws import SeededAccount
from localcluster.faults import FORWARDED, REPLAYED, FaultProxy
from provisioner.api.types import AWSProvider, Provisioner, ProvisionerSpec
from provisioner.cloudprovider.aws.provider import AWSCloudProvider
from provisioner.cloudprovider.launchrecord import LABELS_TAG, TAINTS_TAG
from provisioner.cloudprovider.types import LaunchRecord, NodeRequest
from provisioner.controllers.provisioning.adoption import Adoption, Outcome
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.model.taints import Taint
from provisioner.settings import NodeDefaults
from provisioner.state.cluster import ClusterState
from provisioner.state.inflight import InFlightLedger

LABELS = {
    wk.PROVISIONER_NAME: "default",
    wk.INSTANCE_TYPE: "r6gd.xlarge",
    wk.CAPACITY_TYPE: "on-demand",
    wk.ZONE: "ap-south-1a",
    wk.ARCH: "arm64",
    "workload": "web",
    "team": "checkout",
}
TAINTS = (
    {"key": "dedicated", "value": "checkout", "effect": "NoSchedule"},
    {"key": "example.com/agent-not-ready", "effect": "NoSchedule"},
)


def make_provisioner() -> Provisioner:
    selector = (("kubernetes.io/cluster/karpenter-demo", "*"),)
    return Provisioner(name="default", spec=ProvisionerSpec(
        provider=AWSProvider(subnet_selector=selector, security_group_selector=selector)))


@pytest.fixture
def own_cluster(account, ec2, ssm, clock, catalog, make_settings_for):
    """A provider whose cluster name is this test's alone: its list() sees only this test's instances."""
    name = f"adoption-{uuid.uuid4().hex[:8]}"
    return AWSCloudProvider(make_settings_for(account, cluster_name=name), ec2, ssm, None, clock, catalog)


def launch(provider, labels=LABELS, taints=TAINTS):
    provisioner = make_provisioner()
    types = {t.name: t for t in provider.get_instance_types(provisioner)}
    request = NodeRequest(
        id=f"nr-{uuid.uuid4().hex[:16]}", provisioner=provisioner, instance_type_options=(types["r6gd.xlarge"],),
        requirements=Requirements.from_labels({k: v for k, v in labels.items() if k != wk.PROVISIONER_NAME}),
        labels=labels, taints=taints,
    )
    return request, provider.create(request)


def tags_of(ec2, instance_id):
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in instance["Tags"]}


def run_instance(ec2, account: SeededAccount, tags):
    """An instance launched outside Groupless (RunInstances) with ``tags``."""
    answer = ec2.run_instances(
        ImageId=account.images["x86_64"], InstanceType="m5.large", MinCount=1, MaxCount=1,
        SubnetId=account.subnets["ap-south-1a"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return answer["Instances"][0]["InstanceId"]


def test_createfleet_tags_the_instance_with_its_launch_record_and_list_reads_it(own_cluster, ec2):
    request, machine = launch(own_cluster)
    tags = tags_of(ec2, machine.instance_id)
    assert tags[LABELS_TAG] == "team=checkout,workload=web"  # the instance decides the well-known ones
    assert tags[TAINTS_TAG] == "dedicated=checkout:NoSchedule,example.com/agent-not-ready:NoSchedule"
    assert tags[wk.PROVISIONER_NAME] == "default" and tags[wk.NODE_REQUEST_TAG] == request.id
    [listed] = own_cluster.list()
    assert listed.provider_id == machine.provider_id
    assert (listed.provisioner_name, listed.node_request_id) == ("default", request.id)
    assert listed.record == LaunchRecord(
        labels={"team": "checkout", "workload": "web"},
        taints=(Taint("dedicated", "NoSchedule", "checkout"), Taint("example.com/agent-not-ready", "NoSchedule")),
    )
    assert listed.name == machine.name and listed.name.startswith("ip-10-0-")


def test_a_long_record_is_split_over_several_tags_and_read_back_whole(own_cluster, ec2):
    labels = {**LABELS, **{f"example.com/label-{i}": "v" * 60 for i in range(8)}}
    _, machine = launch(own_cluster, labels=labels)
    tags = tags_of(ec2, machine.instance_id)
    assert f"{LABELS_TAG}-2" in tags and all(len(v) <= 256 for v in tags.values())
    [listed] = own_cluster.list()
    assert listed.record is not None
    assert listed.record.labels == {k: v for k, v in labels.items() if k not in wk.WELL_KNOWN_LABELS}


def test_list_finds_our_instances_without_a_provisioner_and_never_another_tools(own_cluster, ec2, account):
    cluster = own_cluster.settings.cluster_name
    ours = run_instance(ec2, account, {f"kubernetes.io/cluster/{cluster}": "owned", "groupless.dev/cluster": cluster})
    node_group = run_instance(ec2, account, {f"kubernetes.io/cluster/{cluster}": "owned"})  # an EKS node group's
    listed = {m.instance_id: m for m in own_cluster.list()}
    assert ours in listed and node_group not in listed
    assert (listed[ours].provisioner_name, listed[ours].record) == (None, None)


def test_adoption_over_ec2_writes_the_node_from_tags_and_type_and_terminates_the_unattributable(
    own_cluster, ec2, account, clock
):
    _, machine = launch(own_cluster)
    cluster = own_cluster.settings.cluster_name
    stray = run_instance(ec2, account, {f"kubernetes.io/cluster/{cluster}": "owned", "groupless.dev/cluster": cluster})
    kube = FakeKubeAPI(clock)
    kube.create("Provisioner", {"apiVersion": wk.API_VERSION, "kind": wk.KIND, "metadata": {"name": "default"},
                                "spec": {"provider": {"subnetSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
                                                      "securityGroupSelector": {"kubernetes.io/cluster/karpenter-demo": "*"}},
                                         "taints": [{"key": "dedicated", "value": "checkout", "effect": "NoSchedule"}]}})
    state = ClusterState(kube, clock)
    state.resync()
    ledger = InFlightLedger(nominated_on=lambda node: ())
    adoption = Adoption(kube, own_cluster, clock, EventRecorder(kube, clock=clock), ledger, NodeDefaults())
    result = adoption.adopt(state.snapshot())
    assert result.outcomes == {machine.provider_id: Outcome.ADOPTED, f"aws:///ap-south-1a/{stray}": Outcome.TERMINATED}
    node = kube.get("Node", machine.name)
    assert node["spec"]["providerID"] == machine.provider_id
    labels = node["metadata"]["labels"]
    assert {k: labels[k] for k in ("workload", "team", wk.INSTANCE_TYPE, wk.ZONE, wk.CAPACITY_TYPE, wk.ARCH)} == {
        "workload": "web", "team": "checkout", wk.INSTANCE_TYPE: "r6gd.xlarge", wk.ZONE: "ap-south-1a",
        wk.CAPACITY_TYPE: "on-demand", wk.ARCH: "arm64"}
    assert labels["karpenter.k8s.aws/instance-family"] == "r6gd"  # the catalog's shape labels
    # the AWS catalog's conversion: r6gd.xlarge allocatable 3820m / 29217Mi
    assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == ("3820m", "29217Mi")
    assert {"key": "example.com/agent-not-ready", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert machine.name in ledger.written()
    state_of_stray = ec2.describe_instances(InstanceIds=[stray])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state_of_stray in ("shutting-down", "terminated")



def test_a_request_launched_again_after_its_instance_was_terminated_gets_a_new_instance(
    account, ssm, clock, catalog, make_settings_for
):
    """EC2 answers a ClientToken with its first instance even once terminated (the fault proxy does the same).

    The launcher terminates an instance whose Node it could not write, and the pods' next round
    sends the same node request: its token is spent, so the launch goes again with a new one.
    """
    with FaultProxy(account.endpoint_url) as proxy:
        ec2 = boto3.client("ec2", endpoint_url=proxy.url, region_name=account.region,
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        settings = make_settings_for(account, cluster_name=f"adoption-{uuid.uuid4().hex[:8]}")
        provider = AWSCloudProvider(settings, ec2, ssm, None, clock, catalog)
        request, first = launch(provider)
        provider.delete(first.provider_id)  # its Node could not be written
        second = provider.create(request)
        assert second.instance_id != first.instance_id
        assert [m.instance_id for m in provider.list()] == [second.instance_id]
        assert provider.create(request).instance_id == second.instance_id  # found by its tags
        counts = proxy.counts()
        assert (counts[("CreateFleet", FORWARDED)], counts[("CreateFleet", REPLAYED)]) == (2, 1)
