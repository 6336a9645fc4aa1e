"""The fault proxy on loopback in front of a moto server, called by boto3 as the controller calls EC2."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localcluster.aws import start_moto_server
from localcluster.faults import FORWARDED, LOST, REPLAYED, THROTTLE, UNAVAILABLE, FaultPlan, FaultProxy
from tests.builders.expectations import eventually

REGION = "ap-south-1"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server, url = start_moto_server()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def proxy(moto_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(moto_url, seed=3) as running:
        yield running


def ec2(url: str, attempts: int = 1) -> Any:
    config = Config(retries={"total_max_attempts": attempts, "mode": "standard"})
    return boto3.client("ec2", endpoint_url=url, region_name=REGION, config=config,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def image(url: str) -> str:
    return str(ec2(url).describe_images(Owners=["amazon"])["Images"][0]["ImageId"])


def instances_tagged(url: str, value: str) -> list[str]:
    found = ec2(url).describe_instances(Filters=[{"Name": "tag:test", "Values": [value]}])
    return [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]


def test_calls_pass_through_unchanged_without_faults(proxy: FaultProxy, moto_url: str) -> None:
    through = ec2(proxy.url).describe_availability_zones()["AvailabilityZones"]
    direct = ec2(moto_url).describe_availability_zones()["AvailabilityZones"]
    assert [z["ZoneName"] for z in through] == [z["ZoneName"] for z in direct] != []
    assert proxy.counts() == {("DescribeAvailabilityZones", FORWARDED): 1}


@pytest.mark.parametrize(("kind", "code"), [(THROTTLE, "RequestLimitExceeded"), (UNAVAILABLE, "Unavailable")])
def test_an_error_fault_answers_as_ec2_and_a_retry_gets_through(proxy: FaultProxy, kind: str, code: str) -> None:
    proxy.inject_next("DescribeInstances", kind)
    with pytest.raises(ClientError) as raised:
        ec2(proxy.url).describe_instances()
    assert raised.value.response["Error"]["Code"] == code
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    proxy.inject_next("DescribeInstances", kind)
    ec2(proxy.url, attempts=2).describe_instances()  # botocore's retry, as the controller's client does
    assert proxy.counts()[("DescribeInstances", kind)] == 2
    assert proxy.counts()[("DescribeInstances", FORWARDED)] == 1


def test_a_lost_answer_launches_once_and_the_retry_with_its_client_token_gets_the_same_instance(
    proxy: FaultProxy, moto_url: str
) -> None:
    ami, marker = image(moto_url), uuid.uuid4().hex
    proxy.inject_next("RunInstances", LOST)
    answer = ec2(proxy.url, attempts=2).run_instances(
        ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1, ClientToken=f"token-{marker}",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "test", "Value": marker}]}])
    assert instances_tagged(moto_url, marker) == [answer["Instances"][0]["InstanceId"]]  # moto launched once
    counts = proxy.counts()
    assert (counts[("RunInstances", LOST)], counts[("RunInstances", FORWARDED)], counts[("RunInstances", REPLAYED)]) == (
        1, 1, 1)


def test_without_retries_a_lost_answer_is_an_error_although_the_instance_runs(proxy: FaultProxy, moto_url: str) -> None:
    ami, marker = image(moto_url), uuid.uuid4().hex
    proxy.plan = FaultPlan(rate=1.0, kinds=(LOST,), actions=frozenset({"RunInstances"}))
    with pytest.raises(Exception, match="Connection was closed|RemoteDisconnected|closed"):
        ec2(proxy.url).run_instances(ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1,
                                     TagSpecifications=[{"ResourceType": "instance",
                                                         "Tags": [{"Key": "test", "Value": marker}]}])
    assert len(instances_tagged(moto_url, marker)) == 1


def test_a_held_answer_waits_while_its_call_has_taken_effect(proxy: FaultProxy, moto_url: str) -> None:
    ami, marker = image(moto_url), uuid.uuid4().hex
    proxy.hold_answers("RunInstances")
    answers: list[Any] = []
    caller = threading.Thread(target=lambda: answers.append(ec2(proxy.url).run_instances(
        ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "test", "Value": marker}]}])))
    caller.start()
    assert eventually(lambda: proxy.holding("RunInstances") == 1, 30)
    [launched] = instances_tagged(moto_url, marker)  # the instance runs; its launcher has not heard yet
    assert answers == []
    proxy.release_answers("RunInstances")
    caller.join(30)
    assert [i["InstanceId"] for i in answers[0]["Instances"]] == [launched]
    assert proxy.holding("RunInstances") == 0
