"""The fake CloudProvider behaves like the AWS provider where controllers can tell."""

import re

import pytest

from provisioner.api.types import AWSProvider, Provisioner, ProvisionerSpec
from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider, default_instance_types, make_instance_type
from provisioner.cloudprovider.types import (
    CloudProvider,
    InsufficientCapacityError,
    LaunchError,
    NodeRequest,
    NotFoundError,
)
from provisioner.model.requirements import Requirements
from provisioner.model.resources import GIB, MIB

PROVISIONER = Provisioner(
    name="default",
    spec=ProvisionerSpec(
        provider=AWSProvider(subnet_selector=(("kubernetes.io/cluster/karpenter-demo", "*"),))
    ),
)


def request(request_id, options, **labels):
    return NodeRequest(
        id=request_id,
        provisioner=PROVISIONER,
        instance_type_options=tuple(options),
        requirements=Requirements.from_labels(labels),
    )


def by_name(name):
    return next(t for t in default_instance_types() if t.name == name)


def test_fake_satisfies_the_protocol():
    assert isinstance(FakeCloudProvider(), CloudProvider)


def test_make_instance_type_builds_offerings_and_prices():
    it = make_instance_type("m5.large", cpu_milli=2000, memory_bytes=8 * GIB, pods=29, price=0.096)
    assert [(o.zone, o.capacity_type, o.price) for o in it.offerings] == [
        ("ap-south-1a", "on-demand", 0.096),
        ("ap-south-1b", "on-demand", 0.096),
        ("ap-south-1c", "on-demand", 0.096),
        ("ap-south-1a", "spot", 0.0384),
        ("ap-south-1b", "spot", 0.0384),
        ("ap-south-1c", "spot", 0.0384),
    ]
    assert it.allocatable == it.capacity
    gpu = make_instance_type("g4dn.xlarge", gpus=1, overhead={"cpu": 180})
    assert gpu.has_accelerator and gpu.allocatable["cpu"] == 3820


def test_default_catalog_uses_the_aws_model():
    r6gd = by_name("r6gd.xlarge")
    assert r6gd.arch == "arm64"
    assert (
        r6gd.capacity["cpu"] == 4000
        and r6gd.capacity["memory"] == 30310 * MIB
        and r6gd.capacity["pods"] == 58
    )
    assert r6gd.allocatable["cpu"] == 3820 and r6gd.allocatable["memory"] == 29217 * MIB


def test_walkthrough_request_launches_on_demand_arm64_in_zone_a():
    fake = FakeCloudProvider()
    machine = fake.create(
        request(
            "req-1",
            [by_name("r6gd.xlarge")],
            **{"karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "ap-south-1a"},
        )
    )
    assert machine.instance_type == "r6gd.xlarge"
    assert machine.zone == "ap-south-1a" and machine.capacity_type == "on-demand"
    assert re.fullmatch(r"aws:///ap-south-1a/i-[0-9a-f]{17}", machine.provider_id)
    assert re.fullmatch(r"ip-10-0-\d+-\d+\.ap-south-1\.compute\.internal", machine.name)
    assert machine.labels["kubernetes.io/arch"] == "arm64"
    assert machine.node_request_id == "req-1" and machine.provisioner_name == "default"
    assert fake.create_calls[0].id == "req-1"


def test_spot_preferred_when_allowed():
    fake = FakeCloudProvider()
    machine = fake.create(request("r", [by_name("m5.large")]))
    assert machine.capacity_type == "spot"


def test_create_is_idempotent_per_request_id():
    fake = FakeCloudProvider()
    first = fake.create(request("same", [by_name("m5.large")]))
    second = fake.create(request("same", [by_name("m5.large")]))
    assert first == second
    assert len(fake.launches) == 1 and len(fake.list()) == 1
    assert len(fake.create_calls) == 2


def test_ice_on_one_offering_then_the_next_succeeds_and_is_cached_for_three_minutes():
    clock = FakeClock()
    fake = FakeCloudProvider(clock=clock)
    fake.insufficient_capacity.add(("r6gd.xlarge", "ap-south-1a", "on-demand"))
    zone_a = {"karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "ap-south-1a"}
    with pytest.raises(InsufficientCapacityError) as error:
        fake.create(request("r1", [by_name("r6gd.xlarge")], **zone_a))
    assert error.value.offerings == (("r6gd.xlarge", "ap-south-1a", "on-demand"),)
    listed = {
        (t.name, o.zone, o.capacity_type): o.available
        for t in fake.get_instance_types(PROVISIONER)
        for o in t.offerings
    }
    assert listed[("r6gd.xlarge", "ap-south-1a", "on-demand")] is False
    assert listed[("r6gd.xlarge", "ap-south-1b", "on-demand")] is True
    # the next option succeeds
    machine = fake.create(request("r1", [by_name("r6gd.xlarge"), by_name("r5.xlarge")], **zone_a))
    assert machine.instance_type == "r5.xlarge"
    # an unrestricted request goes to another zone of the same type
    other = fake.create(
        request("r2", [by_name("r6gd.xlarge")], **{"karpenter.sh/capacity-type": "on-demand"})
    )
    assert (other.instance_type, other.zone) == ("r6gd.xlarge", "ap-south-1b")
    clock.advance(181)
    assert all(o.available for t in fake.get_instance_types(PROVISIONER) for o in t.offerings)


def test_next_error_is_raised_once():
    fake = FakeCloudProvider()
    fake.next_error = LaunchError("throttled")
    with pytest.raises(LaunchError):
        fake.create(request("r", [by_name("m5.large")]))
    assert fake.create(request("r", [by_name("m5.large")])).instance_type == "m5.large"


def test_delete_get_list():
    fake = FakeCloudProvider()
    a = fake.create(request("a", [by_name("m5.large")]))
    b = fake.create(request("b", [by_name("c5.large")]))
    assert [m.provider_id for m in fake.list()] == sorted([a.provider_id, b.provider_id])
    assert fake.get(a.provider_id) == a
    fake.delete(a.provider_id)
    fake.delete(a.provider_id)  # already gone: success
    fake.delete("aws:///ap-south-1a/i-00000000000000000")
    with pytest.raises(NotFoundError):
        fake.get(a.provider_id)
    assert fake.list() == [b]
    assert fake.delete_calls[:2] == [a.provider_id, a.provider_id]
    # a deleted request id launches anew
    again = fake.create(request("a", [by_name("m5.large")]))
    assert again.provider_id != a.provider_id


def test_no_options_is_a_launch_error():
    with pytest.raises(LaunchError):
        FakeCloudProvider().create(request("r", []))
