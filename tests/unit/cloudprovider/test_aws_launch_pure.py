"""Pure launch pieces of the AWS provider: AMI parameters, user data, launch templates, fleet requests."""

import pytest
import yaml
from botocore.exceptions import ClientError

from provisioner.api.types import EBS, AWSProvider, BlockDeviceMapping, KubeletConfiguration, MetadataOptions
from provisioner.cloudprovider.aws.amifamily import ephemeral_storage_gib, variant_of
from provisioner.cloudprovider.aws.amis import parameter_name
from provisioner.cloudprovider.aws.errors import translate
from provisioner.cloudprovider.aws.fleet import (
    Override,
    build_create_fleet_input,
    client_token,
    parse_create_fleet_output,
)
from provisioner.cloudprovider.aws.launchtemplates import (
    LaunchTemplateConfig,
    block_device_mappings,
    metadata_options,
)
from provisioner.cloudprovider.aws.provider import parse_provider_id, selector_filters
from provisioner.cloudprovider.aws.userdata import make_bootstrap, user_data
from provisioner.cloudprovider.fake import make_instance_type
from provisioner.cloudprovider.types import ConfigurationError, LaunchError, NotFoundError


@pytest.mark.parametrize(
    ("family", "arch", "variant", "expected"),
    [
        (
            "AL2023",
            "arm64",
            "standard",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id",
        ),
        (
            "AL2023",
            "amd64",
            "nvidia",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        ),
        (
            "AL2023",
            "amd64",
            "neuron",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/neuron/recommended/image_id",
        ),
        (
            "AL2",
            "amd64",
            "standard",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended/image_id",
        ),
        (
            "AL2",
            "arm64",
            "standard",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2-arm64/recommended/image_id",
        ),
        (
            "AL2",
            "amd64",
            "neuron",
            "/aws/service/eks/optimized-ami/1.36/amazon-linux-2-gpu/recommended/image_id",
        ),
        ("Bottlerocket", "arm64", "standard", "/aws/service/bottlerocket/aws-k8s-1.36/arm64/latest/image_id"),
        (
            "Bottlerocket",
            "amd64",
            "nvidia",
            "/aws/service/bottlerocket/aws-k8s-1.36-nvidia/x86_64/latest/image_id",
        ),
        (
            "Ubuntu",
            "amd64",
            "standard",
            "/aws/service/canonical/ubuntu/eks/24.04/1.36/stable/current/amd64/hvm/ebs-gp3/ami-id",
        ),
    ],
)
def test_ami_parameter_names(family, arch, variant, expected):
    assert parameter_name(family, arch, variant, "1.36") == expected


def test_variant_and_unknown_family():
    assert variant_of(make_instance_type("g4dn.xlarge", gpus=1)) == "nvidia"
    assert (
        variant_of(make_instance_type("inf1.xlarge", gpus=1, gpu_resource="aws.amazon.com/neuron"))
        == "neuron"
    )
    assert variant_of(make_instance_type("m5.large")) == "standard"
    with pytest.raises(ConfigurationError, match="Windows"):
        parameter_name("Windows", "amd64", "standard", "1.36")


BOOT = dict(
    cluster_name="karpenter-demo",
    cluster_endpoint="https://ABC.gr7.ap-south-1.eks.amazonaws.com",
    cluster_ca_bundle="LS0tCA==",
    service_cidr="10.100.0.0/16",
    labels={
        "karpenter.sh/capacity-type": "spot",
        "team": "a",
        "node-role.kubernetes.io/worker": "",  # NodeRestriction forbids it: left to the controller
        "node.kubernetes.io/lifecycle": "x",
    },
    taints=[
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},
    ],
)


def test_al2023_node_config():
    text = user_data("AL2023", make_bootstrap(**BOOT, max_pods=110, cluster_dns="10.100.0.10"))
    assert text.startswith('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n')
    document = yaml.safe_load(text.split("---\n", 1)[1].split("\n--//--")[0])
    assert document["apiVersion"] == "node.eks.aws/v1alpha1"
    assert document["spec"]["cluster"] == {
        "name": "karpenter-demo",
        "apiServerEndpoint": "https://ABC.gr7.ap-south-1.eks.amazonaws.com",
        "certificateAuthority": "LS0tCA==",
        "cidr": "10.100.0.0/16",
    }
    assert document["spec"]["kubelet"]["config"] == {"maxPods": 110, "clusterDNS": ["10.100.0.10"]}
    assert document["spec"]["kubelet"]["flags"] == [
        "--node-labels=karpenter.sh/capacity-type=spot,node.kubernetes.io/lifecycle=x,team=a",
        "--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/not-ready:NoSchedule",
    ]


def test_al2_bootstrap_sh():
    kubelet = KubeletConfiguration(
        system_reserved=(("cpu", "200m"),), eviction_hard=(("memory.available", "5%"),)
    )
    text = user_data("AL2", make_bootstrap(**BOOT, max_pods=110, kubelet=kubelet))
    assert (
        "/etc/eks/bootstrap.sh karpenter-demo \\\n  --apiserver-endpoint https://ABC.gr7.ap-south-1.eks.amazonaws.com"
        in text
    )
    assert "--b64-cluster-ca LS0tCA==" in text and "--use-max-pods false" in text
    assert (
        "--kubelet-extra-args '--node-labels=karpenter.sh/capacity-type=spot,node.kubernetes.io/lifecycle=x,team=a "
        "--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/not-ready:NoSchedule --max-pods=110 "
        "--system-reserved=cpu=200m --eviction-hard=memory.available<5%'"
    ) in text
    assert user_data("Ubuntu", make_bootstrap(**BOOT)) == user_data("AL2", make_bootstrap(**BOOT))


def test_bottlerocket_toml():
    text = user_data("Bottlerocket", make_bootstrap(**BOOT))
    assert text.startswith(
        '[settings.kubernetes]\napi-server = "https://ABC.gr7.ap-south-1.eks.amazonaws.com"\n'
    )
    assert (
        '[settings.kubernetes.node-taints]\n"dedicated" = ["gpu:NoSchedule"]\n"karpenter.sh/not-ready" = [":NoSchedule"]'
        in text
    )


def config(**overrides):
    values = dict(
        cluster_name="karpenter-demo",
        image_id="ami-1",
        security_group_ids=("sg-1",),
        user_data="x",
        instance_profile="KarpenterNodeInstanceProfile-karpenter-demo",
        metadata_options=metadata_options(None),
        block_device_mappings=block_device_mappings(None, "AL2023"),
        tags=(),
    )
    values.update(overrides)
    return LaunchTemplateConfig(**values)


def test_launch_template_name_is_a_stable_hash():
    assert config().name == config().name
    assert (
        config().name.startswith("groupless/karpenter-demo/") and len(config().name.rsplit("/", 1)[1]) == 16
    )
    assert config(user_data="y").name != config().name
    assert config(image_id="ami-2").name != config().name
    data = config().launch_template_data()
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 2,
        "HttpTokens": "required",
    }
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 20, "VolumeType": "gp3"},
        }
    ]
    assert config(instance_profile="arn:aws:iam::1:instance-profile/x").launch_template_data()[
        "IamInstanceProfile"
    ] == {"Arn": "arn:aws:iam::1:instance-profile/x"}
    assert metadata_options(MetadataOptions(http_tokens="optional")) == (("HttpTokens", "optional"),)


def test_block_devices_and_ephemeral_storage():
    provider = AWSProvider(
        block_device_mappings=(
            BlockDeviceMapping("/dev/xvda", EBS(volume_size="100Gi", volume_type="gp3", iops=3000)),
        )
    )
    assert block_device_mappings(provider.block_device_mappings, "AL2023") == (
        ("/dev/xvda", (("Iops", 3000), ("VolumeSize", 100), ("VolumeType", "gp3"))),
    )
    assert ephemeral_storage_gib(provider, "AL2023") == 100
    assert ephemeral_storage_gib(None, "Bottlerocket") == 20
    assert block_device_mappings(None, "Bottlerocket") == (
        ("/dev/xvda", (("DeleteOnTermination", True), ("Encrypted", True), ("VolumeSize", 4), ("VolumeType", "gp3"))),
        ("/dev/xvdb", (("DeleteOnTermination", True), ("Encrypted", True), ("VolumeSize", 20), ("VolumeType", "gp3"))),
    )
    assert [device for device, _ in block_device_mappings(None, "Ubuntu")] == ["/dev/sda1"]


OVERRIDES = [
    Override("groupless/c/a", "r6gd.xlarge", "ap-south-1a", "subnet-a"),
    Override("groupless/c/b", "m5.xlarge", "ap-south-1a", "subnet-a"),
    Override("groupless/c/a", "r6gd.xlarge", "ap-south-1b", "subnet-b"),
]


def test_create_fleet_input():
    request = build_create_fleet_input("req-1", "on-demand", OVERRIDES, {"b": "2", "a": "1"})
    assert request["Type"] == "instant"
    assert (
        request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"} and "SpotOptions" not in request
    )
    assert [
        c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in request["LaunchTemplateConfigs"]
    ] == [
        "groupless/c/a",
        "groupless/c/b",
    ]
    assert request["LaunchTemplateConfigs"][0]["Overrides"] == [
        {"InstanceType": "r6gd.xlarge", "SubnetId": "subnet-a", "AvailabilityZone": "ap-south-1a"},
        {"InstanceType": "r6gd.xlarge", "SubnetId": "subnet-b", "AvailabilityZone": "ap-south-1b"},
    ]
    assert request["TagSpecifications"][0] == {
        "ResourceType": "instance",
        "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
    }
    spot = build_create_fleet_input("req-1", "spot", OVERRIDES, {})
    assert spot["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert len(request["ClientToken"]) <= 64
    assert client_token("req-1", "on-demand", OVERRIDES) == client_token(
        "req-1", "on-demand", list(reversed(OVERRIDES))
    )
    assert client_token("req-1", "on-demand", OVERRIDES) != client_token("req-1", "on-demand", OVERRIDES[:2])
    assert client_token("req-1", "on-demand", OVERRIDES) != client_token("req-2", "on-demand", OVERRIDES)
    # a token whose instance was terminated is spent: the next one names it, the same on every retry
    spent = client_token("req-1", "on-demand", OVERRIDES, ["i-0dead"])
    assert spent == client_token("req-1", "on-demand", OVERRIDES, ("i-0dead",))
    assert spent not in (client_token("req-1", "on-demand", OVERRIDES),
                         client_token("req-1", "on-demand", OVERRIDES, ["i-0dead", "i-0dead2"]))
    assert len(spent) <= 64


def test_parse_create_fleet_output_uses_subnet_zone_when_missing():
    result = parse_create_fleet_output(
        {
            "FleetId": "fleet-1",
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": {
                        "Overrides": {"InstanceType": "m5.xlarge", "SubnetId": "subnet-b"}
                    },
                    "Lifecycle": "spot",
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "no capacity",
                }
            ],
            "Instances": [
                {"InstanceIds": ["i-1", "i-2"], "InstanceType": "r6gd.xlarge", "Lifecycle": "spot"}
            ],
        },
        "spot",
        {"subnet-b": "ap-south-1b"},
    )
    assert [(i.instance_id, i.instance_type) for i in result.instances] == [
        ("i-1", "r6gd.xlarge"),
        ("i-2", "r6gd.xlarge"),
    ]
    assert result.errors[0].offering == ("m5.xlarge", "ap-south-1b", "spot")


def test_selectors_provider_ids_and_errors():
    assert selector_filters({"kubernetes.io/cluster/x": "*", "Name": "a,b"}) == [
        {"Name": "tag:Name", "Values": ["a", "b"]},
        {"Name": "tag-key", "Values": ["kubernetes.io/cluster/x"]},
    ]
    assert parse_provider_id("aws:///ap-south-1a/i-0123") == ("ap-south-1a", "i-0123")
    for bad in ("gce://x/y", "aws:///ap-south-1a/"):
        with pytest.raises(NotFoundError):
            parse_provider_id(bad)

    def client_error(code):
        return ClientError({"Error": {"Code": code, "Message": "m"}}, "RunInstances")

    assert isinstance(translate(client_error("InvalidInstanceID.NotFound"), "x"), NotFoundError)
    assert isinstance(translate(client_error("InvalidParameterValue"), "x"), ConfigurationError)
    assert isinstance(translate(client_error("InternalError"), "x"), LaunchError)


def test_overrides_are_capped_cheapest_first():
    many = [Override("lt", f"type{i}.large", "ap-south-1a", "subnet-a") for i in range(400)]
    request = build_create_fleet_input("req", "spot", many, {})
    kept = request["LaunchTemplateConfigs"][0]["Overrides"]
    assert (
        len(kept) == 300
        and kept[0]["InstanceType"] == "type0.large"
        and kept[-1]["InstanceType"] == "type299.large"
    )
