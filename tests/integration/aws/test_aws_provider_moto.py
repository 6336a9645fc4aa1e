"""The AWS provider against a seeded moto server on loopback: catalog figures, the walkthrough launch, idempotency."""

import base64
import logging
import uuid

import pytest
import yaml

from provisioner.api.types import KubeletConfiguration, Provisioner, ProvisionerSpec
from provisioner.cloudprovider.aws.catalog import NodeConfiguration, instance_types_for
from provisioner.cloudprovider.aws.provider import AWSCloudProvider
from provisioner.cloudprovider.types import (
    CloudProvider,
    ConfigurationError,
    LoggingCloudProvider,
    NodeRequest,
    NotFoundError,
)
from provisioner.model.requirements import Requirements
from provisioner.model.resources import GIB, MIB

WALKTHROUGH = {
    "node.kubernetes.io/instance-type": "r6gd.xlarge",
    "karpenter.sh/capacity-type": "on-demand",
    "topology.kubernetes.io/zone": "ap-south-1a",
    "kubernetes.io/arch": "arm64",
}


def types_by_name(provider, provisioner):
    return {t.name: t for t in provider.get_instance_types(provisioner)}


def node_request(provider, provisioner, names, labels, request_id=None, **kwargs):
    catalog = types_by_name(provider, provisioner)
    return NodeRequest(
        id=request_id or f"req-{uuid.uuid4().hex[:12]}",
        provisioner=provisioner,
        instance_type_options=tuple(catalog[n] for n in names),
        requirements=Requirements.from_labels(labels),
        labels={"karpenter.sh/provisioner-name": provisioner.name, **kwargs.pop("node_labels", {})},
        **kwargs,
    )


def record_fleet_calls(ec2):
    calls = []
    ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: calls.append(params)
    )
    return calls


def test_provider_satisfies_the_protocol(provider):
    assert isinstance(provider, CloudProvider)


def test_r6gd_xlarge_exact_capacity_and_allocatable(provider, provisioner):
    r6gd = types_by_name(provider, provisioner)["r6gd.xlarge"]
    assert r6gd.arch == "arm64"
    assert (r6gd.capacity["cpu"], r6gd.capacity["memory"], r6gd.capacity["pods"]) == (4000, 30310 * MIB, 58)
    assert (r6gd.allocatable["cpu"], r6gd.allocatable["memory"]) == (3820, 29217 * MIB)
    assert r6gd.capacity["ephemeral-storage"] == 20 * GIB
    assert sorted({(o.zone, o.capacity_type) for o in r6gd.offerings}) == [
        (z, c) for z in ("ap-south-1a", "ap-south-1b", "ap-south-1c") for c in ("on-demand", "spot")
    ]


@pytest.mark.parametrize("family", ["AL2023", "Bottlerocket"])
def test_instance_types_equal_the_conversion_of_ec2s_whole_answers(provider, ec2, provisioner_with, family):
    """The provider keeps only what the conversion reads of EC2's answers: its types are those of the whole answers."""
    provisioner = provisioner_with(ami_family=family)
    types = [t for page in ec2.get_paginator("describe_instance_types").paginate() for t in page["InstanceTypes"]]
    offerings = [
        o
        for page in ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone")
        for o in page["InstanceTypeOfferings"]
    ]
    zones = frozenset(s.zone for s in provider.subnets(provisioner))

    listed = provider.get_instance_types(provisioner)

    expected = instance_types_for(
        NodeConfiguration.of(provisioner), types, offerings, provider.pricing.book(), zones=zones
    ).offered
    assert len(listed) == len(expected) > 700  # moto offers 752 types in ap-south-1
    assert listed == expected  # name, capacity, overhead, offerings and prices, labels
    assert len(provider.catalog.types) == len({o["InstanceType"] for o in offerings}) < len(types)


def test_m5_large_and_exclusions(provider, provisioner):
    types = types_by_name(provider, provisioner)
    m5 = types["m5.large"]
    assert m5.arch == "amd64"
    assert (m5.capacity["cpu"], m5.capacity["memory"], m5.capacity["pods"]) == (2000, 7577 * MIB, 29)
    assert "m5.metal" not in types and not any(n.endswith(".metal") for n in types)
    assert types["g4dn.xlarge"].capacity["nvidia.com/gpu"] == 1
    assert types["inf1.xlarge"].capacity["aws.amazon.com/neuron"] == 1
    # moto's spot prices are placeholders (0.00001): the static table stands in (us-east-1 as proxy)
    prices = {(o.zone, o.capacity_type): o.price for o in types["r6gd.xlarge"].offerings}
    assert prices[("ap-south-1a", "on-demand")] == 0.2304
    assert prices[("ap-south-1a", "spot")] == pytest.approx(0.2304 * 0.4)


def test_kubelet_max_pods_and_pod_density(
    catalog, account, ec2, ssm, clock, make_settings_for, provisioner_with
):
    dense_off = AWSCloudProvider(
        make_settings_for(account, eni_limited_pod_density=False), ec2, ssm, None, clock, catalog
    )
    assert types_by_name(dense_off, provisioner_with())["m5.large"].capacity["pods"] == 110
    provisioner = Provisioner(
        name="kubelet",
        spec=ProvisionerSpec(
            provider=provisioner_with().spec.provider, kubelet_configuration=KubeletConfiguration(max_pods=20)
        ),
    )
    assert types_by_name(dense_off, provisioner)["m5.large"].capacity["pods"] == 20


def test_walkthrough_launch(provider, provisioner, ec2, account, caplog):
    calls = record_fleet_calls(ec2)
    request = node_request(
        provider,
        provisioner,
        ["r6gd.xlarge"],
        WALKTHROUGH,
        taints=({"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},),
    )
    # the process launches through LoggingCloudProvider, which logs the walkthrough's line
    with caplog.at_level(logging.INFO, logger="provisioner.cloudprovider.types"):
        machine = LoggingCloudProvider(provider).create(request)

    (fleet,) = calls
    assert fleet["Type"] == "instant"
    assert fleet["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "on-demand",
    }
    assert fleet["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in fleet
    (config,) = fleet["LaunchTemplateConfigs"]
    assert config["Overrides"] == [
        {
            "InstanceType": "r6gd.xlarge",
            "SubnetId": account.subnets["ap-south-1a"],
            "AvailabilityZone": "ap-south-1a",
        }
    ]
    template_name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert template_name.startswith("groupless/karpenter-demo/")

    assert (machine.instance_type, machine.zone, machine.capacity_type) == (
        "r6gd.xlarge",
        "ap-south-1a",
        "on-demand",
    )
    assert machine.provider_id == f"aws:///ap-south-1a/{machine.instance_id}"
    assert machine.labels["kubernetes.io/arch"] == "arm64"
    assert machine.labels["karpenter.k8s.aws/instance-family"] == "r6gd"
    assert machine.name.startswith("ip-10-0-") and machine.node_request_id == request.id
    assert (
        f"Launched instance: {machine.instance_id}, hostname: {machine.name}, type: r6gd.xlarge, "
        "zone: ap-south-1a, capacityType: on-demand" in caplog.text
    )

    instance = ec2.describe_instances(InstanceIds=[machine.instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["Name"] == "karpenter.sh/provisioner-name/default"
    assert tags["karpenter.sh/provisioner-name"] == "default"
    assert tags["kubernetes.io/cluster/karpenter-demo"] == "owned"
    assert tags["groupless.dev/node-request"] == request.id
    assert instance["SubnetId"] == account.subnets["ap-south-1a"]
    assert (
        instance["ImageId"]
        == account.ami_parameters[
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id"
        ]
    )

    version = ec2.describe_launch_template_versions(LaunchTemplateName=template_name)[
        "LaunchTemplateVersions"
    ][0]
    data = version["LaunchTemplateData"]
    assert data["SecurityGroupIds"] == [account.security_group_id]
    assert data["IamInstanceProfile"] == {"Name": account.instance_profile_name}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    text = base64.b64decode(data["UserData"]).decode()
    assert "Content-Type: application/node.eks.aws" in text
    node_config = yaml.safe_load(text.split("---\n", 1)[1].split("\n--//--")[0])
    assert node_config["kind"] == "NodeConfig"
    assert node_config["spec"]["cluster"]["name"] == "karpenter-demo"
    assert node_config["spec"]["kubelet"]["flags"] == [
        "--node-labels=karpenter.sh/capacity-type=on-demand,karpenter.sh/provisioner-name=default",
        "--register-with-taints=karpenter.sh/not-ready:NoSchedule",
    ]


def test_retried_create_launches_one_instance(provider, provisioner, ec2):
    calls = record_fleet_calls(ec2)
    request = node_request(
        provider, provisioner, ["m5.large", "m5.xlarge"], {"karpenter.sh/capacity-type": "on-demand"}
    )
    first = provider.create(request)
    second = provider.create(request)
    assert first.provider_id == second.provider_id
    assert len(calls) == 1
    found = ec2.describe_instances(
        Filters=[{"Name": "tag:groupless.dev/node-request", "Values": [request.id]}]
    )
    assert sum(len(r["Instances"]) for r in found["Reservations"]) == 1


def test_launch_templates_are_reused(provider, provisioner, ec2):
    calls = record_fleet_calls(ec2)
    labels = {"karpenter.sh/capacity-type": "on-demand", "kubernetes.io/arch": "amd64"}
    provider.create(node_request(provider, provisioner, ["c5.large"], labels))
    fresh = AWSCloudProvider(
        provider.settings, ec2, provider.amis._ssm, None, provider.clock, provider.catalog
    )
    fresh.create(node_request(fresh, provisioner, ["c5.large"], labels))
    names = [
        c["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in calls
    ]
    assert names[0] == names[1]
    templates = ec2.describe_launch_templates(LaunchTemplateNames=[names[0]])["LaunchTemplates"]
    assert len(templates) == 1


def test_spot_uses_price_capacity_optimized(provider, provisioner, ec2):
    calls = record_fleet_calls(ec2)
    machine = provider.create(
        node_request(provider, provisioner, ["m6g.large", "c6g.large"], {"kubernetes.io/arch": "arm64"})
    )
    (fleet,) = calls
    assert fleet["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    # overrides are options x zones, one subnet per zone, cheapest first (c6g.large < m6g.large)
    overrides = fleet["LaunchTemplateConfigs"][0]["Overrides"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in overrides] == [
        (t, z) for t in ("c6g.large", "m6g.large") for z in ("ap-south-1a", "ap-south-1b", "ap-south-1c")
    ]
    assert machine.capacity_type == "spot"


def test_al2_on_1_36_names_the_missing_parameter(provider, ec2, provisioner_with):
    provisioner = provisioner_with(ami_family="AL2")
    with pytest.raises(
        ConfigurationError, match=r"/aws/service/eks/optimized-ami/1\.36/amazon-linux-2/recommended/image_id"
    ):
        provider.create(
            node_request(provider, provisioner, ["m5.large"], {"karpenter.sh/capacity-type": "on-demand"})
        )


def test_bottlerocket_user_data(provider, ec2, provisioner_with):
    calls = record_fleet_calls(ec2)
    provisioner = provisioner_with(ami_family="Bottlerocket")
    provider.create(
        node_request(
            provider,
            provisioner,
            ["m5.large"],
            {"karpenter.sh/capacity-type": "on-demand"},
            node_labels={"team": "a"},
        )
    )
    name = calls[0]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    data = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"
    ]
    text = base64.b64decode(data["UserData"]).decode()
    assert '[settings.kubernetes.node-labels]\n"karpenter.sh/capacity-type" = "on-demand"' in text
    assert '"team" = "a"' in text
    assert [m["DeviceName"] for m in data["BlockDeviceMappings"]] == ["/dev/xvda", "/dev/xvdb"]


def test_configuration_errors(
    catalog, provider, account, ec2, ssm, clock, make_settings_for, provisioner_with
):
    no_subnets = provisioner_with(subnet_selector=(("kubernetes.io/cluster/other", "*"),))
    with pytest.raises(ConfigurationError, match="no subnets matched selector"):
        provider.get_instance_types(no_subnets)
    no_profile = AWSCloudProvider(
        make_settings_for(account, default_instance_profile=None), ec2, ssm, None, clock, catalog
    )
    with pytest.raises(ConfigurationError, match="instanceProfile"):
        no_profile.create(node_request(no_profile, provisioner_with(), ["m5.large"], {}))


def test_public_subnet_is_not_selected(provider, provisioner, account):
    assert account.public_subnet_id not in {s.subnet_id for s in provider.subnets(provisioner)}
    assert {s.zone for s in provider.subnets(provisioner)} == {"ap-south-1a", "ap-south-1b", "ap-south-1c"}


def test_delete_get_list(provider, provisioner):
    machine = provider.create(
        node_request(provider, provisioner, ["t3.medium"], {"karpenter.sh/capacity-type": "on-demand"})
    )
    assert provider.get(machine.provider_id).instance_id == machine.instance_id
    assert machine.provider_id in {m.provider_id for m in provider.list()}
    provider.delete(machine.provider_id)
    provider.delete(machine.provider_id)  # already going: success
    provider.delete("aws:///ap-south-1a/i-0123456789abcdef0")  # never existed: success
    with pytest.raises(NotFoundError):  # moto: shutting-down, then terminated on the next describe
        for _ in range(3):
            provider.get(machine.provider_id)
    assert machine.provider_id not in {m.provider_id for m in provider.list()}
    with pytest.raises(NotFoundError):
        provider.get("aws:///ap-south-1a/i-0123456789abcdef0")


def test_unused_launch_templates_are_deleted(provider, provisioner, ec2, clock):
    calls = record_fleet_calls(ec2)
    labels = {"karpenter.sh/capacity-type": "on-demand", "kubernetes.io/arch": "amd64"}
    machine = provider.create(
        node_request(provider, provisioner, ["c5.xlarge"], labels, node_labels={"gc": "test"})
    )
    name = calls[0]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    # The fake clock started before the catalog fetch and the launch: ages count from EC2's CreateTime.
    (template,) = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    clock.advance(template["CreateTime"].timestamp() + 3601 - clock.now())
    # Old enough and not used by this process for an hour: only the live instance keeps it. moto's
    # CreateFleet sets no aws:ec2launchtemplate:id tag, so that is the template recorded at launch.
    assert name not in provider.delete_unused_launch_templates(min_age_seconds=3600)
    provider.delete(machine.provider_id)
    for _ in range(2):
        ec2.describe_instances(InstanceIds=[machine.instance_id])  # moto: shutting-down, then terminated
    assert name not in provider.delete_unused_launch_templates(min_age_seconds=7200)  # unused, but young
    assert name in provider.delete_unused_launch_templates(min_age_seconds=3600)
    assert not ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": [name]}])[
        "LaunchTemplates"
    ]


def test_provisioner_tags_win_except_the_ones_bookkeeping_needs(provider, ec2, provisioner_with):
    provisioner = provisioner_with(
        tags=(
            ("team", "payments"),
            ("Name", "payments-node"),
            ("kubernetes.io/cluster/karpenter-demo", "shared"),
        )
    )
    machine = provider.create(
        node_request(provider, provisioner, ["m5.large"], {"karpenter.sh/capacity-type": "on-demand"})
    )
    instance = ec2.describe_instances(InstanceIds=[machine.instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert (tags["team"], tags["Name"]) == ("payments", "payments-node")
    assert tags["kubernetes.io/cluster/karpenter-demo"] == "owned"
    assert machine.provider_id in {m.provider_id for m in provider.list()}


def test_launch_without_cluster_ca_is_refused_naming_the_setting(
    catalog, account, ec2, ssm, clock, make_settings_for, provisioner_with
):
    no_ca = AWSCloudProvider(make_settings_for(account, cluster_ca_bundle=""), ec2, ssm, None, clock, catalog)
    before = len(ec2.describe_launch_templates()["LaunchTemplates"])
    with pytest.raises(ConfigurationError, match=r"--cluster-ca-bundle \(GROUPLESS_CLUSTER_CA_BUNDLE"):
        no_ca.create(node_request(no_ca, provisioner_with(), ["m5.large"], {}))
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == before


def test_service_cidr_reaches_nodeadm(catalog, account, ec2, ssm, clock, make_settings_for, provisioner_with):
    provider = AWSCloudProvider(make_settings_for(account, service_cidr="172.20.0.0/16"), ec2, ssm, None, clock,
                                catalog)
    calls = record_fleet_calls(ec2)
    provider.create(node_request(provider, provisioner_with(), ["m5.large"], {}))
    template_name = calls[-1]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    data = ec2.describe_launch_template_versions(LaunchTemplateName=template_name)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"]
    text = base64.b64decode(data["UserData"]).decode()
    cluster = yaml.safe_load(text.split("---\n", 1)[1].split("\n--//--")[0])["spec"]["cluster"]
    assert (cluster["cidr"], cluster["certificateAuthority"]) == ("172.20.0.0/16", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t")
