"""Garbage collection of generated launch templates (``LaunchTemplates.delete_unused``) against a Stubber-wrapped EC2.

Real EC2 tags instances launched from a template with ``aws:ec2launchtemplate:id`` (template
IDs reach ``delete_unused`` as ``in_use_ids``); launches recorded by the provider itself reach it
as ``in_use_names``. Either keeps a template, as do its age and recent use by this process.
"""

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from provisioner.clock import FakeClock
from provisioner.cloudprovider.aws.launchtemplates import LaunchTemplateConfig, LaunchTemplates

NOW = 1_796_000_000.0
HOUR = 3600.0


def template(template_id: str, name: str, age_seconds: float) -> dict:
    return {
        "LaunchTemplateId": template_id,
        "LaunchTemplateName": name,
        "CreateTime": datetime.fromtimestamp(NOW - age_seconds, tz=UTC),
    }


@pytest.fixture
def ec2():
    client = boto3.client(
        "ec2", region_name="ap-south-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_only_old_unused_templates_of_the_cluster_are_deleted(ec2):
    client, stubber = ec2
    templates = [
        template("lt-0000000000000000a", "groupless/demo/tagged", 2 * HOUR),
        template("lt-0000000000000000b", "groupless/demo/recorded", 2 * HOUR),
        template("lt-0000000000000000c", "groupless/demo/young", HOUR - 1),
        template("lt-0000000000000000d", "groupless/demo/old", HOUR),
        template("lt-0000000000000000e", "groupless/other/old", 2 * HOUR),
        template("lt-0000000000000000f", "user-template", 2 * HOUR),
    ]
    stubber.add_response(
        "describe_launch_templates",
        {"LaunchTemplates": templates},
        {"Filters": [{"Name": "tag:groupless.dev/cluster", "Values": ["demo"]}]},
    )
    stubber.add_response("delete_launch_template", {}, {"LaunchTemplateId": "lt-0000000000000000d"})
    deleted = LaunchTemplates(client, FakeClock(start=NOW)).delete_unused(
        "demo", {"lt-0000000000000000a"}, HOUR, in_use_names={"groupless/demo/recorded"}
    )
    assert deleted == ["groupless/demo/old"]


def test_a_template_used_by_this_process_within_the_age_is_kept(ec2):
    client, stubber = ec2
    clock = FakeClock(start=NOW - 2 * HOUR)
    templates = LaunchTemplates(client, clock)
    config = LaunchTemplateConfig("demo", "ami-0123456789abcdef0", ("sg-1",), "", "profile", (), (), ())
    stubber.add_response(
        "describe_launch_templates",
        {"LaunchTemplates": [template("lt-0000000000000000a", config.name, 3 * HOUR)]},
        {"LaunchTemplateNames": [config.name]},
    )
    templates.ensure(config, {})
    clock.advance(HOUR + HOUR / 2)  # now NOW - 0.5 h: used 1.5 h ago, created 2.5 h ago
    listing = {"LaunchTemplates": [template("lt-0000000000000000a", config.name, 3 * HOUR)]}
    stubber.add_response("describe_launch_templates", listing)
    assert templates.delete_unused("demo", set(), 2 * HOUR) == []  # old enough, but used recently
    stubber.add_response("describe_launch_templates", listing)
    stubber.add_response("delete_launch_template", {}, {"LaunchTemplateId": "lt-0000000000000000a"})
    assert templates.delete_unused("demo", set(), HOUR) == [config.name]
