"""The launch tags: what a launch records on its instance, split within EC2's limits, read back whole."""

import logging

import pytest

from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.cloudprovider.fake import FakeCloudProvider, make_instance_type
from provisioner.cloudprovider.launchrecord import (
    LABELS_TAG,
    MAX_TAG_VALUE,
    TAINTS_TAG,
    format_taints,
    launch_tags,
    parse_labels,
    parse_taints,
    read_launch_tags,
)
from provisioner.cloudprovider.types import ConfigurationError, LaunchRecord, NodeRequest
from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.model.taints import Taint


def request(labels, taints=(), request_id="nr-1"):
    return NodeRequest(id=request_id, provisioner=Provisioner(name="default", spec=ProvisionerSpec()), instance_type_options=(),
                       requirements=Requirements(), labels=labels, taints=taints)


def test_the_tags_name_the_provisioner_and_request_and_record_what_the_instance_does_not_decide():
    tags = launch_tags(request(
        {wk.PROVISIONER_NAME: "default", wk.ZONE: "ap-south-1a", wk.INSTANCE_TYPE: "m5.large",
         "karpenter.k8s.aws/instance-family": "m5", "workload": "web", "team": "checkout"},
        ({"key": "dedicated", "value": "checkout", "effect": "NoSchedule"}, {"key": "agent", "effect": "NoExecute"}),
    ))
    assert tags == {
        wk.PROVISIONER_NAME: "default",
        wk.NODE_REQUEST_TAG: "nr-1",
        LABELS_TAG: "team=checkout,workload=web",
        TAINTS_TAG: "dedicated=checkout:NoSchedule,agent:NoExecute",
    }
    assert read_launch_tags(tags) == ("default", "nr-1", LaunchRecord(
        labels={"team": "checkout", "workload": "web"},
        taints=(Taint("dedicated", "NoSchedule", "checkout"), Taint("agent", "NoExecute"))))


def test_an_empty_record_is_still_a_record():
    tags = launch_tags(request({wk.PROVISIONER_NAME: "default"}))
    assert (tags[LABELS_TAG], tags[TAINTS_TAG]) == ("", "")
    assert read_launch_tags(tags) == ("default", "nr-1", LaunchRecord())


def test_instances_of_an_older_launch_or_another_tool_have_no_record():
    assert read_launch_tags({wk.PROVISIONER_NAME: "default", wk.NODE_REQUEST_TAG: "nr-9"}) == ("default", "nr-9", None)
    assert read_launch_tags({"Name": "something"}) == (None, None, None)


def test_a_long_record_is_split_over_tags_of_at_most_256_characters():
    labels = {f"example.com/key-{i:02d}": "v" * 50 for i in range(20)}
    tags = launch_tags(request(labels))
    parts = [k for k in tags if k.startswith(LABELS_TAG)]
    assert parts == [LABELS_TAG, *(f"{LABELS_TAG}-{i}" for i in range(2, len(parts) + 1))]
    assert len(parts) == 6 and all(len(tags[k]) <= MAX_TAG_VALUE for k in parts)
    _, _, record = read_launch_tags(tags)
    assert record is not None and record.labels == labels


def test_a_record_too_long_for_the_tags_is_refused_before_launching():
    labels = {f"example.com/key-{i:03d}": "v" * 60 for i in range(40)}  # ~3,200 characters
    with pytest.raises(ConfigurationError, match=r"tag groupless.dev/node-labels: .* at most 2048 fit"):
        launch_tags(request(labels))
    cloud = FakeCloudProvider()
    too_long = NodeRequest(id="nr-2", provisioner=Provisioner(name="default", spec=ProvisionerSpec()),
                           instance_type_options=tuple(cloud.instance_types[:1]), requirements=Requirements(),
                           labels=labels)
    with pytest.raises(ConfigurationError):
        cloud.create(too_long)
    assert cloud.machines == []


def test_an_edited_record_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert read_launch_tags({LABELS_TAG: "team", TAINTS_TAG: ""}) == (None, None, None)
    assert "label 'team': expected key=value" in caplog.text


def test_taints_and_labels_parse_as_kubelet_writes_them():
    assert parse_labels("a=1,b=,example.com/c=x") == {"a": "1", "b": "", "example.com/c": "x"}
    assert parse_taints("a=1:NoSchedule,example.com/b:NoExecute") == (
        Taint("a", "NoSchedule", "1"), Taint("example.com/b", "NoExecute"))
    assert format_taints(parse_taints("a=1:NoSchedule,b:PreferNoSchedule")) == "a=1:NoSchedule,b:PreferNoSchedule"
    with pytest.raises(ValueError, match="expected key=value:Effect"):
        parse_taints("a=1")


def test_the_fake_provider_keeps_the_same_tags_and_reads_them_back():
    cloud = FakeCloudProvider([make_instance_type("m5.large")])
    made = NodeRequest(id="nr-7", provisioner=Provisioner(name="default", spec=ProvisionerSpec()),
                       instance_type_options=tuple(cloud.instance_types), requirements=Requirements(),
                       labels={"workload": "web"}, taints=({"key": "dedicated", "effect": "NoSchedule"},))
    machine = cloud.create(made)
    [listed] = cloud.list()
    assert listed == machine
    assert (listed.provisioner_name, listed.node_request_id) == ("default", "nr-7")
    assert listed.record == LaunchRecord(labels={"workload": "web"}, taints=(Taint("dedicated", "NoSchedule"),))
