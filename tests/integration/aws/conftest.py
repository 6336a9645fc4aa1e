"""One seeded moto server per test session (ThreadedMotoServer on loopback), shared by every AWS test.

Tests never reset it: each uses its own node request IDs, so they can share the account.
"""

import os
import time
from pathlib import Path

import boto3
import pytest

from localcluster.aws import SeededAccount, seed_account, start_moto_server
from provisioner.api.types import AWSProvider, Provisioner, ProvisionerSpec
from provisioner.clock import FakeClock
from provisioner.cloudprovider.aws.provider import AWSCloudProvider, RawCatalog
from provisioner.cloudprovider.aws.settings import AWSSettings

CLUSTER_TAG = "kubernetes.io/cluster/karpenter-demo"
HERE = Path(__file__).parent

#: Seconds per test here, instead of the 60 s default: starting and seeding the moto server, and
#: moto's first DescribeInstanceTypes for a region, take 25-30 s on 2 busy cores and are counted
#: against whichever test asks first.
MOTO_TIMEOUT_SECONDS = 180


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(MOTO_TIMEOUT_SECONDS))


@pytest.fixture(scope="session")
def account():
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(key, "testing")
    server, endpoint_url = start_moto_server()
    try:
        yield seed_account(endpoint_url)
    finally:
        server.stop()


def aws_client(account: SeededAccount, service: str):
    return boto3.client(
        service,
        endpoint_url=account.endpoint_url,
        region_name=account.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def ec2(account):
    return aws_client(account, "ec2")


@pytest.fixture
def ssm(account):
    return aws_client(account, "ssm")


def make_settings(account: SeededAccount, **overrides) -> AWSSettings:
    values = dict(
        cluster_name=account.cluster_name,
        cluster_endpoint="https://127.0.0.1:6443",
        cluster_ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
        region=account.region,
        endpoint_url=account.endpoint_url,
        default_instance_profile=account.instance_profile_name,
        kubernetes_version="v1.36.3",
        pricing_api=False,
        describe_interval=0.0,
    )
    values.update(overrides)
    return AWSSettings(**values)


@pytest.fixture(scope="session")
def catalog():
    """One EC2 catalog fetched for the whole test run (seconds to fetch from moto); providers share it."""
    return RawCatalog()


@pytest.fixture
def clock():
    """A fake clock starting at the real time (moto stamps resources with the real time)."""
    return FakeClock(start=float(int(time.time())))


@pytest.fixture
def provider(account, ec2, ssm, clock, catalog):
    return AWSCloudProvider(make_settings(account), ec2, ssm, None, clock, catalog)


def make_provisioner(name: str = "default", **provider_fields) -> Provisioner:
    fields = dict(
        subnet_selector=((CLUSTER_TAG, "*"),),
        security_group_selector=((CLUSTER_TAG, "*"),),
    )
    fields.update(provider_fields)
    return Provisioner(name=name, spec=ProvisionerSpec(provider=AWSProvider(**fields)))


@pytest.fixture
def provisioner():
    return make_provisioner()


@pytest.fixture
def make_settings_for():
    """``make_settings_for(account, **overrides)`` -> AWSSettings for the seeded account."""
    return make_settings


@pytest.fixture
def provisioner_with():
    """``provisioner_with(name="default", **AWSProvider fields)`` -> Provisioner selecting the seeded account."""
    return make_provisioner
