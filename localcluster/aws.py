"""A moto server on loopback, seeded the way a real EKS account looks, as EC2/IAM/SSM for tests and the demo.

Why a seeded server rather than ``mock_aws``: the controller runs as its own process in the
local control plane and talks to AWS over HTTP with ``endpoint_url``, exactly as it would to
EC2; only a server exercises that path (signing, serialisation, pagination shapes). The
integration tests use the same server in-process (``start_moto_server``) so both agree.

What ``seed_account`` creates (the walkthrough's account, ``reference/protocols.md`` section 4):

- a VPC ``10.0.0.0/16`` with three *private* subnets in ap-south-1a/b/c tagged
  ``kubernetes.io/cluster/<cluster>=shared`` (what ``subnetSelector: {kubernetes.io/cluster/<cluster>: '*'}``
  finds) and one *public* subnet without that tag (which must not be found);
- a security group tagged ``kubernetes.io/cluster/<cluster>=owned``;
- the IAM role ``KarpenterNodeRole-<cluster>`` and instance profile
  ``KarpenterNodeInstanceProfile-<cluster>`` (the walkthrough's ``aws.defaultInstanceProfile``);
- the EKS AMI parameters in SSM at the paths AWS publishes (AL2023 standard/nvidia/neuron,
  Bottlerocket standard/nvidia, Ubuntu 24.04, for x86_64 and arm64). AL2 parameters are
  published only for Kubernetes minors up to 1.32, as AWS does (no EKS-optimized AL2 AMI
  exists for 1.33 and later), so a Provisioner asking for AL2 on 1.36 gets the error a real
  account gives. Each parameter points at one of moto's built-in images of the right
  architecture, so instances launched from it report that architecture.

moto refuses ``put_parameter`` under ``/aws/`` (AccessDeniedException), so the parameters are
written straight into moto's in-process SSM backend; that works because ``ThreadedMotoServer``
serves from this process's state.

``python -m localcluster.aws --port P`` starts a seeded server, prints one JSON line describing
the account (the local control plane, which runs it as a subprocess, parses that first line)
then the shell ``export`` lines a user needs to point ``groupless plan`` or the AWS CLI at it,
and blocks until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

DEFAULT_REGION = "ap-south-1"
DEFAULT_CLUSTER = "karpenter-demo"
DEFAULT_KUBERNETES_MINOR = "1.36"
#: The last Kubernetes minor for which AWS published an EKS-optimized Amazon Linux 2 AMI.
LAST_AL2_MINOR = (1, 32)
#: moto's account when no credentials say otherwise.
MOTO_ACCOUNT_ID = "123456789012"

_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(frozen=True)
class SeededAccount:
    """What :func:`seed_account` created (IDs are moto's, stable for one server).

    ``subnets`` maps zone -> private subnet ID (tagged for the cluster); ``public_subnet_id``
    is the untagged subnet a selector must not find; ``ami_parameters`` maps every SSM
    parameter name written -> image ID; ``images`` maps arch (``x86_64``/``arm64``) -> the
    default image used for it.
    """

    endpoint_url: str
    region: str
    account_id: str
    cluster_name: str
    kubernetes_minor: str
    vpc_id: str
    subnets: dict[str, str]
    public_subnet_id: str
    security_group_id: str
    instance_profile_name: str
    instance_profile_arn: str
    role_name: str
    ami_parameters: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)

    @property
    def subnet_ids(self) -> list[str]:
        """Private subnet IDs in zone order."""
        return [self.subnets[z] for z in sorted(self.subnets)]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def start_moto_server(host: str = "127.0.0.1", port: int = 0) -> tuple[Any, str]:
    """Start a ``ThreadedMotoServer`` on ``host:port`` (0 = any free port).

    Returns ``(server, endpoint_url)``; stop it with ``server.stop()``. The server shares this
    process's moto state, which :func:`seed_account` relies on.
    """
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per AWS call otherwise
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    bound_host, bound_port = server.get_host_and_port()
    return server, f"http://{bound_host}:{bound_port}"


def client(service: str, endpoint_url: str, region: str = DEFAULT_REGION) -> Any:
    """A boto3 client for the moto server with dummy credentials."""
    return boto3.client(service, endpoint_url=endpoint_url, region_name=region, **_CREDENTIALS)  # type: ignore[call-overload]


def ami_parameter_paths(kubernetes_minor: str) -> dict[tuple[str, str, str], str]:
    """The SSM parameters AWS publishes for a Kubernetes minor: (family, arch, variant) -> path.

    ``arch`` is ``x86_64``/``arm64``; ``variant`` is ``standard``, ``nvidia`` or ``neuron``.
    Same paths as ``provisioner.cloudprovider.aws.amis`` resolves.
    """
    v = kubernetes_minor
    paths: dict[tuple[str, str, str], str] = {}
    eks = f"/aws/service/eks/optimized-ami/{v}"
    for arch in ("x86_64", "arm64"):
        paths[("AL2023", arch, "standard")] = f"{eks}/amazon-linux-2023/{arch}/standard/recommended/image_id"
        paths[("AL2023", arch, "nvidia")] = f"{eks}/amazon-linux-2023/{arch}/nvidia/recommended/image_id"
        paths[("Bottlerocket", arch, "standard")] = (
            f"/aws/service/bottlerocket/aws-k8s-{v}/{arch}/latest/image_id"
        )
        paths[("Bottlerocket", arch, "nvidia")] = (
            f"/aws/service/bottlerocket/aws-k8s-{v}-nvidia/{arch}/latest/image_id"
        )
        ubuntu_arch = "amd64" if arch == "x86_64" else "arm64"
        paths[("Ubuntu", arch, "standard")] = (
            f"/aws/service/canonical/ubuntu/eks/24.04/{v}/stable/current/{ubuntu_arch}/hvm/ebs-gp3/ami-id"
        )
    paths[("AL2023", "x86_64", "neuron")] = f"{eks}/amazon-linux-2023/x86_64/neuron/recommended/image_id"
    major, minor = (int(x) for x in v.split(".")[:2])
    if (major, minor) <= LAST_AL2_MINOR:
        paths[("AL2", "x86_64", "standard")] = f"{eks}/amazon-linux-2/recommended/image_id"
        paths[("AL2", "arm64", "standard")] = f"{eks}/amazon-linux-2-arm64/recommended/image_id"
        paths[("AL2", "x86_64", "nvidia")] = f"{eks}/amazon-linux-2-gpu/recommended/image_id"
    return paths


def _pick_image(ec2: Any, arch: str, name_pattern: str) -> str | None:
    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[{"Name": "architecture", "Values": [arch]}, {"Name": "name", "Values": [name_pattern]}],
    )["Images"]
    linux = sorted(i["ImageId"] for i in images if i.get("Platform") != "windows")
    return linux[0] if linux else None


def _images(ec2: Any) -> dict[tuple[str, str], str]:
    """(family, arch) -> a moto built-in image of that architecture (AL2023/AL2 by name when present)."""
    result: dict[tuple[str, str], str] = {}
    for arch in ("x86_64", "arm64"):
        fallback = _pick_image(ec2, arch, "*")
        if fallback is None:
            raise RuntimeError(f"moto has no {arch} image to stand in for the EKS AMIs")
        result[("AL2023", arch)] = _pick_image(ec2, arch, "al2023-ami-2023*") or fallback
        result[("AL2", arch)] = _pick_image(ec2, arch, "amzn2-ami-hvm-*") or fallback
        result[("Bottlerocket", arch)] = _pick_image(ec2, arch, "al2023-ami-minimal-*") or fallback
        result[("Ubuntu", arch)] = _pick_image(ec2, arch, "al2023-ami-minimal-*") or fallback
    return result


def put_ssm_parameter(
    name: str, value: str, region: str = DEFAULT_REGION, account_id: str = MOTO_ACCOUNT_ID
) -> None:
    """Write a parameter into moto's in-process SSM backend (allowed under ``/aws/``, unlike the API)."""
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[account_id][region]
    versions = backend._parameters[name]
    versions.append(
        Parameter(  # type: ignore[abstract]  # moto's CloudFormationModel marks hooks abstract
            account_id=account_id,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.now(UTC),
            version=len(versions) + 1,
            data_type="aws:ec2:image",
        )
    )


def delete_ssm_parameter(name: str, region: str = DEFAULT_REGION, account_id: str = MOTO_ACCOUNT_ID) -> None:
    """Remove a parameter from moto's in-process SSM backend (to test a missing image)."""
    from moto.ssm.models import ssm_backends

    ssm_backends[account_id][region]._parameters.pop(name, None)


def seed_account(
    endpoint_url: str,
    region: str = DEFAULT_REGION,
    cluster: str = DEFAULT_CLUSTER,
    kubernetes_minor: str = DEFAULT_KUBERNETES_MINOR,
) -> SeededAccount:
    """Create the walkthrough's account in the moto server at ``endpoint_url`` (see the module docstring).

    Must run in the process that serves ``endpoint_url`` (SSM parameters go into its backend).
    Not idempotent: each call creates another VPC.
    """
    ec2 = client("ec2", endpoint_url, region)
    iam = client("iam", endpoint_url, region)
    cluster_tag = f"kubernetes.io/cluster/{cluster}"

    vpc_id = ec2.create_vpc(
        CidrBlock="10.0.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "Name", "Value": f"{cluster}-vpc"}]}],
    )["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    subnets: dict[str, str] = {}
    for index, suffix in enumerate("abc"):
        zone = f"{region}{suffix}"
        subnets[zone] = ec2.create_subnet(
            VpcId=vpc_id,
            CidrBlock=f"10.0.{index * 32}.0/19",
            AvailabilityZone=zone,
            TagSpecifications=[
                {
                    "ResourceType": "subnet",
                    "Tags": [
                        {"Key": "Name", "Value": f"{cluster}-private-{zone}"},
                        {"Key": cluster_tag, "Value": "shared"},
                        {"Key": "kubernetes.io/role/internal-elb", "Value": "1"},
                    ],
                }
            ],
        )["Subnet"]["SubnetId"]
    public_subnet_id = ec2.create_subnet(
        VpcId=vpc_id,
        CidrBlock="10.0.192.0/20",
        AvailabilityZone=f"{region}a",
        TagSpecifications=[
            {
                "ResourceType": "subnet",
                "Tags": [
                    {"Key": "Name", "Value": f"{cluster}-public-{region}a"},
                    {"Key": "kubernetes.io/role/elb", "Value": "1"},
                ],
            }
        ],
    )["Subnet"]["SubnetId"]
    security_group_id = ec2.create_security_group(
        GroupName=f"{cluster}-node",
        Description=f"Nodes of EKS cluster {cluster}",
        VpcId=vpc_id,
        TagSpecifications=[
            {
                "ResourceType": "security-group",
                "Tags": [{"Key": cluster_tag, "Value": "owned"}, {"Key": "Name", "Value": f"{cluster}-node"}],
            }
        ],
    )["GroupId"]

    role_name = f"KarpenterNodeRole-{cluster}"
    iam.create_role(
        RoleName=role_name,
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "ec2.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )
    profile_name = f"KarpenterNodeInstanceProfile-{cluster}"
    profile = iam.create_instance_profile(InstanceProfileName=profile_name)["InstanceProfile"]
    iam.add_role_to_instance_profile(InstanceProfileName=profile_name, RoleName=role_name)

    account_id = MOTO_ACCOUNT_ID
    images = _images(ec2)
    parameters: dict[str, str] = {}
    for (family, arch, _variant), path in sorted(ami_parameter_paths(kubernetes_minor).items()):
        image_id = images[(family, arch)]
        put_ssm_parameter(path, image_id, region, account_id)
        parameters[path] = image_id

    return SeededAccount(
        endpoint_url=endpoint_url,
        region=region,
        account_id=account_id,
        cluster_name=cluster,
        kubernetes_minor=kubernetes_minor,
        vpc_id=vpc_id,
        subnets=subnets,
        public_subnet_id=public_subnet_id,
        security_group_id=security_group_id,
        instance_profile_name=profile_name,
        instance_profile_arn=str(profile["Arn"]),
        role_name=role_name,
        ami_parameters=parameters,
        images={arch: images[("AL2023", arch)] for arch in ("x86_64", "arm64")},
    )


def shell_exports(endpoint_url: str, region: str) -> list[str]:
    """The lines ``python -m localcluster.aws`` prints after its JSON line, for a user's shell.

    boto3 refuses to sign a request without credentials ("Unable to locate credentials") even
    for moto, which accepts any; the region must be the seeded one or EC2 answers for another.
    """
    return [
        "# moto accepts any credentials; to use this server from a shell (groupless plan, aws):",
        f"export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION={region}",
        f"# groupless plan -f manifests/ --aws-endpoint-url {endpoint_url}",
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m localcluster.aws``: serve a seeded moto until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m localcluster.aws", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--region", default=DEFAULT_REGION)
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER)
    parser.add_argument("--kubernetes-minor", default=DEFAULT_KUBERNETES_MINOR)
    args = parser.parse_args(argv)
    server, endpoint_url = start_moto_server(args.host, args.port)
    account = seed_account(endpoint_url, args.region, args.cluster, args.kubernetes_minor)
    print(account.to_json(), flush=True)  # first line: localcluster.cluster parses it
    print("\n".join(shell_exports(endpoint_url, args.region)), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
