"""``groupless plan`` reading its catalog from EC2: moto's in-process AWS (``mock_aws``) behind boto3."""

import argparse
import json

import pytest

from provisioner import plan as plan_cli
from tests.unit.plan.test_plan import FIXTURES, INFLATE, WALKTHROUGH_PROVISIONER, write
from tests.unit.plan.test_plan_messages import ec2_plan, no_aws_region

__all__ = ["no_aws_region"]  # the fixture, shared with the unit tests of plan's messages

#: moto's first DescribeInstanceTypes and offerings for a region: about 30 s on 2 cores, 40 s busy
pytestmark = pytest.mark.timeout(180)


def test_catalog_from_ec2_when_no_files_are_given(tmp_path, capsys, monkeypatch):
    from moto import mock_aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    parser = argparse.ArgumentParser()
    plan_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["plan", "-f", str(write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER)),
                              "-f", str(write(tmp_path, "i.yaml", INFLATE)), "--region", "ap-south-1",
                              "--pricing-file", str(FIXTURES / "pricing.json"), "-o", "json"])
    with mock_aws():
        code = args.func(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert [(n["instanceTypes"], n["zone"], n["capacityType"], n["pricePerHour"]) for n in result["nodes"]] == [
        (["r6gd.xlarge"], "ap-south-1a", "on-demand", 0.2304)]


def test_ec2_catalog_takes_the_region_from_aws_region(tmp_path, capsys, no_aws_region, monkeypatch):
    from moto import mock_aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    with mock_aws():
        code, out, err = ec2_plan(capsys, tmp_path)
    assert code == 0, err
    result = json.loads(out)
    assert result["region"] == "ap-south-1"
    assert [(n["instanceTypes"], n["zone"], n["pricePerHour"]) for n in result["nodes"]] == [
        (["r6gd.xlarge"], "ap-south-1a", 0.2304)]
