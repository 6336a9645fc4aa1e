"""``groupless plan`` as a fresh user meets it: region, prices, credentials, messages, help."""

import json

import pytest

from provisioner import plan as plan_cli

from .test_plan import (
    FIXTURES,
    INFLATE,
    OFFERINGS,
    PRICING,
    SOURCE,
    WALKTHROUGH_PROVISIONER,
    parser,
    run,
    write,
)

SMALL = """
apiVersion: v1
kind: Pod
metadata: {name: small}
spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}
"""


def errors(err):
    return [line for line in err.splitlines() if line.startswith("error: ")]


def warnings(err):
    return [line for line in err.splitlines() if line.startswith("warning: ")]


# ----------------------------------------------------------------------------- 1. region and prices
@pytest.mark.parametrize(("zone", "region"), [
    ("ap-south-1a", "ap-south-1"), ("us-gov-west-1b", "us-gov-west-1"), ("us-west-2-lax-1a", "us-west-2"),
    ("us-east-1-wl1-bos-wlz-1", "us-east-1"), ("cn-north-1a", "cn-north-1"), ("nowhere", None), ("ap-south-1", None),
])
def test_region_of_zone(zone, region):
    assert plan_cli.region_of_zone(zone) == region


def test_region_comes_from_the_offerings_zones_and_the_pricing_file_is_used(tmp_path, capsys):
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "s.yaml", SMALL),
                         region=None)
    assert code == 0, err
    result = json.loads(out)
    assert (result["region"], result["priceSource"], result["estimatedPrices"]) == ("ap-south-1", SOURCE, [])
    # the ap-south-1 spot price of the pricing file, not a us-east-1 figure
    assert [(n["instanceTypes"][0], n["capacityType"], n["pricePerHour"]) for n in result["nodes"]] == [
        ("m6g.large", "spot", 0.0291)]
    assert warnings(err) == []


def test_table_names_the_region_its_origin_and_the_price_source(tmp_path, capsys):
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "s.yaml", SMALL),
                       region=None, output="table")
    assert code == 0
    assert out.splitlines()[0] == f"Region: ap-south-1 (from the zones of {OFFERINGS}); prices: {SOURCE}"


def test_pricing_file_without_the_region_is_a_warning(tmp_path, capsys):
    pricing = write(tmp_path, "prices.json", json.dumps({"us-east-1": {"m6g.large": 0.077}, "eu-west-1": {}}))
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "s.yaml", SMALL),
                         region=None, pricing=pricing)
    assert code == 0
    assert warnings(err) == [
        f"warning: {pricing}: no prices for region ap-south-1 (the file has: eu-west-1, us-east-1); "
        "using static table (us-east-1 as proxy)"]
    assert json.loads(out)["priceSource"] == "static table (us-east-1 as proxy)"


def test_region_flag_that_disagrees_with_the_offerings_is_a_warning(tmp_path, capsys):
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "s.yaml", SMALL),
                         region="us-east-1")
    assert code == 0
    assert warnings(err)[0] == (f"warning: --region us-east-1 but the offerings in {OFFERINGS} are in ap-south-1: "
                                "prices are looked up for us-east-1")
    assert json.loads(out)["region"] == "us-east-1"


def test_offerings_of_several_regions_need_the_region_flag(tmp_path, capsys):
    offerings = write(tmp_path, "o.json", json.dumps({"InstanceTypeOfferings": [
        {"InstanceType": "m5.large", "Location": "ap-south-1a", "LocationType": "availability-zone"},
        {"InstanceType": "m5.large", "Location": "eu-west-1a", "LocationType": "availability-zone"}]}))
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), region=None,
                         extra=["--offerings", str(offerings)])
    assert (code, out) == (1, "")
    assert errors(err) == [f"error: {offerings}: cannot tell the region from the offerings' locations "
                           "(ap-south-1, eu-west-1): pass --region"]


def test_unpriced_types_get_one_prefixed_estimate_warning(tmp_path, capsys):
    types = json.loads((FIXTURES / "instance-types.json").read_text())
    m5 = next(t for t in types["InstanceTypes"] if t["InstanceType"] == "m5.large")
    types["InstanceTypes"] = [{**m5, "InstanceType": "x9.large"}]
    offerings = {"InstanceTypeOfferings": [
        {"InstanceType": "x9.large", "Location": "ap-south-1a", "LocationType": "availability-zone"}]}
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "s.yaml", SMALL),
                         region=None, extra=["--instance-types", str(write(tmp_path, "t.json", json.dumps(types))),
                                             "--offerings", str(write(tmp_path, "o.json", json.dumps(offerings)))])
    assert code == 0, err
    assert warnings(err) == [
        f"warning: no price known in ap-south-1 for on-demand/x9.large, spot/x9.large (prices from {SOURCE}): "
        "estimated from vCPU, memory, GPU and architecture; pass --pricing-file with prices for ap-south-1 "
        "for real figures"]
    assert json.loads(out)["estimatedPrices"] == ["on-demand/x9.large", "spot/x9.large"]


@pytest.fixture
def no_aws_region(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def ec2_plan(capsys, tmp_path, *extra):
    args = parser().parse_args(["plan", "-f", str(write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER)),
                                "-f", str(write(tmp_path, "i.yaml", INFLATE)), "--pricing-file", str(PRICING),
                                "-o", "json", *extra])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_ec2_catalog_without_any_region_asks_for_the_flag(tmp_path, capsys, no_aws_region):
    code, out, err = ec2_plan(capsys, tmp_path, "--aws-endpoint-url", "http://127.0.0.1:9")
    assert (code, out) == (1, "")
    assert errors(err) == ["error: no AWS region to read the catalog from EC2 (http://127.0.0.1:9): pass --region "
                           "(or set AWS_REGION), or give --instance-types and --offerings files"]


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


def test_ec2_catalog_without_credentials_says_how_to_set_them(tmp_path, capsys, no_aws_region):
    code, out, err = ec2_plan(capsys, tmp_path, "--region", "ap-south-1", "--aws-endpoint-url", "http://127.0.0.1:9")
    assert (code, out) == (1, "")
    assert errors(err) == [
        "error: EC2 (http://127.0.0.1:9): Unable to locate credentials: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); a moto server accepts any values, e.g. AWS_ACCESS_KEY_ID=testing "
        "AWS_SECRET_ACCESS_KEY=testing"]


# ----------------------------------------------------------------------------- 2. moto server output
def test_local_moto_server_prints_the_exports_after_its_json_line():
    from localcluster.aws import shell_exports

    assert shell_exports("http://127.0.0.1:5000", "ap-south-1") == [
        "# moto accepts any credentials; to use this server from a shell (groupless plan, aws):",
        "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=ap-south-1",
        "# groupless plan -f manifests/ --aws-endpoint-url http://127.0.0.1:5000",
    ]
