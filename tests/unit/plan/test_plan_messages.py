"""``groupless plan`` as a fresh user meets it: region, prices, credentials, messages, help."""

import argparse
import io
import json
import sys

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


# ----------------------------------------------------------------------------- 3. messages
def test_requests_in_reasons_are_kubernetes_quantities(tmp_path, capsys):
    huge = """
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec: {containers: [{name: c, resources: {requests: {cpu: "900", memory: 1Ti}}}]}
"""
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "h.yaml", huge))
    assert code == 0
    assert json.loads(out)["unschedulable"] == [{"pod": "default/huge", "reason": (
        "provisioner default: no instance type has room for the pod's requests cpu=900, memory=1Ti, pods=1 "
        "plus DaemonSet overhead")}]


def test_limits_in_reasons_are_kubernetes_quantities(tmp_path, capsys):
    limited = WALKTHROUGH_PROVISIONER.replace("cpu: 1000", "cpu: 4")
    burst = INFLATE.replace("replicas: 3", "replicas: 5")  # 3 fill one r6gd.xlarge (4 vCPU), the limit
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", limited), write(tmp_path, "b.yaml", burst), output="table")
    assert code == 0
    assert out.splitlines()[-3:-1] == [
        f"Unschedulable default/inflate-{i}: provisioner default: would exceed limits of provisioner default "
        "(cpu: 4 in use or planned of 4; the smallest instance type that fits the pod adds cpu: 4)" for i in (3, 4)]


@pytest.mark.parametrize(("name", "text", "message"), [
    ("nameless.yaml", WALKTHROUGH_PROVISIONER.replace("metadata:\n  name: default\n", ""),
     "document 1: a Provisioner without metadata.name: invalid: metadata: required field is missing"),
    ("nodepool.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\n",
     "document 1: unknown kind 'NodePool' (apiVersion karpenter.sh/v1); Groupless serves Karpenter's "
     "karpenter.sh/v1alpha5 Provisioner API: write it as `apiVersion: karpenter.sh/v1alpha5`, `kind: Provisioner` "
     "(see docs/provisioner-reference.md)"),
    ("noname.yaml", "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n",
     "document 1: a Pod without metadata.name: metadata.name: required field is missing (or metadata.generateName)"),
    ("noversion.yaml", "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
     "document 1: Pod p: apiVersion: required field is missing (kubectl refuses an object without it)"),
])
def test_input_errors_are_exact(tmp_path, capsys, name, text, message):
    bad = write(tmp_path, name, text)
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), bad)
    assert (code, out) == (1, "")
    assert errors(err) == [f"error: {bad}: {message}"]


def test_generate_name_pods_are_named_as_the_api_server_would(tmp_path, capsys):
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: job-}\nspec: {containers: [{name: c}]}\n"
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "g.yaml", pod))
    assert code == 0
    assert [n["pods"] for n in json.loads(out)["nodes"]] == [["default/job-0"]]


def test_bad_pricing_file_is_named_once(tmp_path, capsys):
    bad = write(tmp_path, "bad.json", "not json")
    code, out, err = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), pricing=bad)
    assert (code, out) == (1, "")
    assert errors(err) == [f"error: {bad}: not valid JSON: Expecting value: line 1 column 1 (char 0)"]


def test_empty_directory_says_it_has_no_manifests(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, tmp_path / "empty")
    assert (code, out) == (1, "")
    assert errors(err) == [f"error: no YAML or JSON files in {tmp_path / 'empty'} (looked for .yaml, .yml, .json)"]


def test_dash_reads_standard_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(WALKTHROUGH_PROVISIONER + "---\n" + INFLATE))
    code, out, err = run(capsys, "-")
    assert code == 0, err
    assert [n["instanceTypes"] for n in json.loads(out)["nodes"]] == [["r6gd.xlarge"]]


def test_standard_input_errors_are_named_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("kind: Widget\napiVersion: x/v1\n"))
    code, _, err = run(capsys, "-")
    assert code == 1
    assert errors(err) == ["error: STDIN: document 1: unknown kind 'Widget' (apiVersion x/v1)"]


def test_webhook_warnings_and_replaced_provisioners_are_warning_lines(tmp_path, capsys):
    aliased = WALKTHROUGH_PROVISIONER.replace('key: "kubernetes.io/arch"', 'key: "beta.kubernetes.io/arch"')
    first = write(tmp_path, "a.yaml", WALKTHROUGH_PROVISIONER)
    second = write(tmp_path, "b.yaml", aliased)
    code, out, err = run(capsys, first, second, write(tmp_path, "i.yaml", INFLATE))
    assert code == 0, err
    assert warnings(err) == [
        f"warning: {second}: document 1: Provisioner default: spec.requirements[1].key: label beta.kubernetes.io/arch "
        "is deprecated, use kubernetes.io/arch",
        f"warning: {second}: document 1: Provisioner default replaces the one in {first}: document 1 "
        "(same name; the later one wins, as with kubectl apply)",
    ]
    assert json.loads(out)["nodes"][0]["instanceTypes"] == ["r6gd.xlarge"]


def test_unschedulable_pods_still_exit_zero(tmp_path, capsys):
    far = SMALL.replace("spec: {", "spec: {nodeSelector: {topology.kubernetes.io/zone: us-east-1a}, ")
    code, out, _ = run(capsys, write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER), write(tmp_path, "f.yaml", far))
    assert code == 0
    assert [u["pod"] for u in json.loads(out)["unschedulable"]] == ["default/small"]


def test_help_is_plain_text_with_exit_codes_and_credentials():
    sub = argparse.ArgumentParser(prog="groupless").add_subparsers()
    plan_cli.register(sub)
    text = sub.choices["plan"].format_help()
    assert "``" not in text and ":func:" not in text
    assert "Dry run: print the nodes Groupless would launch for the given manifests." in text
    assert "  0  the plan was printed (some pods may be unschedulable: they are listed with the reason)" in text
    assert "  1  input error (unreadable or invalid manifest, catalog or pricing file, no region); no plan" in text
    assert "export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=ap-south-1" in text
    output = next(a for a in sub.choices["plan"]._actions if "--output" in a.option_strings)
    assert output.help and output.help.startswith("table (default) or json")


# ----------------------------------------------------------------------------- docs/plan.md
DOCS_WEB = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
          resources: {requests: {cpu: 500m, memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: far, namespace: shop}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-1a}
  containers: [{name: c, image: pause, resources: {requests: {cpu: 250m}}}]
"""


def test_the_table_in_docs_plan_md_is_what_the_command_prints(tmp_path, capsys, monkeypatch):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "plan.md").read_text()
    documented = re.search(r"`-o table` \(the default\).*?```\n(.*?)```", page, re.S)
    assert documented is not None
    monkeypatch.chdir(FIXTURES)  # the page shows the file names as a user types them
    args = parser().parse_args([
        "plan", "-f", str(write(tmp_path, "p.yaml", WALKTHROUGH_PROVISIONER)), "-f", str(write(tmp_path, "w.yaml", DOCS_WEB)),
        "--instance-types", "instance-types.json", "--offerings", "offerings.json", "--pricing-file", "pricing.json"])
    assert args.func(args) == 0
    assert capsys.readouterr().out == documented.group(1)
