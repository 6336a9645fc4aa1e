"""LoggingCloudProvider: the walkthrough's launch line once per launch, every other call passed through."""

from __future__ import annotations

import logging

import pytest

from provisioner.api.schemas import load_provisioner
from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider, make_instance_type
from provisioner.cloudprovider.types import LaunchError, LoggingCloudProvider, NodeRequest
from provisioner.model.requirements import Requirements
from provisioner.model.resources import MIB


def request(provisioner_name: str = "default") -> NodeRequest:
    provisioner = load_provisioner({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
                                    "metadata": {"name": provisioner_name}, "spec": {}})
    it = make_instance_type("m5.large", 2000, 7577 * MIB, 29, zones=("z1",), price=0.1)
    return NodeRequest(id="nr-1", provisioner=provisioner, instance_type_options=(it,),
                       requirements=Requirements())


def test_one_launch_line_per_create_and_calls_pass_through(caplog: pytest.LogCaptureFixture) -> None:
    inner = FakeCloudProvider([], clock=FakeClock())
    cloud = LoggingCloudProvider.around(inner)
    assert LoggingCloudProvider.around(cloud) is cloud  # wrapping twice would log twice
    with caplog.at_level(logging.INFO, logger="provisioner.cloudprovider.types"):
        machine = cloud.create(request())
    lines = [r for r in caplog.records if r.getMessage().startswith("Launched instance: ")]
    assert [r.getMessage() for r in lines] == [
        f"Launched instance: {machine.instance_id}, hostname: {machine.name}, type: m5.large, "
        f"zone: z1, capacityType: {machine.capacity_type}"
    ]
    assert lines[0].provisioner == "default"  # type: ignore[attr-defined]
    assert cloud.get(machine.provider_id) == inner.get(machine.provider_id)
    assert [m.instance_id for m in cloud.list()] == [machine.instance_id]
    cloud.delete(machine.provider_id)
    assert inner.list() == []


def test_a_failed_create_logs_no_launch_line(caplog: pytest.LogCaptureFixture) -> None:
    inner = FakeCloudProvider([], clock=FakeClock())
    inner.next_error = LaunchError("throttled")
    with caplog.at_level(logging.INFO), pytest.raises(LaunchError):
        LoggingCloudProvider(inner).create(request())
    assert not [r for r in caplog.records if r.getMessage().startswith("Launched instance: ")]
