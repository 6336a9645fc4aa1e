"""Paths moto cannot produce, through botocore's Stubber with responses in the real AWS shape.

moto's CreateFleet never reports errors (no InsufficientInstanceCapacity, no partial fleets),
never throttles, and has no Pricing API; its spot prices are placeholders. So EC2 here is a
Stubber-wrapped client (which also validates every response against the service model), while
SSM stays the seeded moto server. Response bodies follow the EC2/Pricing API references:
CreateFleet ``Errors[].LaunchTemplateAndOverrides.Overrides`` + ``Lifecycle`` + ``ErrorCode`` +
``ErrorMessage``; Pricing ``GetProducts`` ``PriceList`` entries are JSON documents as strings.
"""

import json
import logging
import time
from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from provisioner.cloudprovider.aws.pricing import PricingProvider, get_products_filters
from provisioner.cloudprovider.aws.provider import AWSCloudProvider
from provisioner.cloudprovider.fake import make_instance_type
from provisioner.cloudprovider.types import InsufficientCapacityError, LaunchError, NodeRequest
from provisioner.model.requirements import Requirements

ZONES = ("ap-south-1a", "ap-south-1b")
SUBNETS = {"ap-south-1a": "subnet-0aaaaaaaaaaaaaaaa", "ap-south-1b": "subnet-0bbbbbbbbbbbbbbbb"}
R6GD = make_instance_type("r6gd.xlarge", 4000, 30310 * 2**20, 58, arch="arm64", zones=ZONES, price=0.2304)
M6G = make_instance_type("m6g.xlarge", 4000, 15155 * 2**20, 58, arch="arm64", zones=ZONES, price=0.154)
ICE_MESSAGE = (
    "We currently do not have sufficient r6gd.xlarge capacity in the Availability Zone you requested "
    "(ap-south-1a). Our system will be working on provisioning additional capacity. You can currently get "
    "r6gd.xlarge capacity by not specifying an Availability Zone in your request or choosing ap-south-1b."
)


def boto_client(service):
    return boto3.client(
        service, region_name="ap-south-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture
def stubbed(account, ssm, clock, make_settings_for):
    ec2 = boto_client("ec2")
    fleets = []
    ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: fleets.append(params)
    )
    with Stubber(ec2) as stubber:
        provider = AWSCloudProvider(make_settings_for(account, endpoint_url=None), ec2, ssm, None, clock)
        yield provider, stubber, fleets
        stubber.assert_no_pending_responses()


def request(provisioner_with, options, labels, request_id="req-stubbed"):
    return NodeRequest(
        id=request_id,
        provisioner=provisioner_with(),
        instance_type_options=tuple(options),
        requirements=Requirements.from_labels(labels),
    )


def override(instance_type, zone):
    return {
        "LaunchTemplateSpecification": {"LaunchTemplateName": "groupless/karpenter-demo/x", "Version": "1"},
        "Overrides": {"InstanceType": instance_type, "SubnetId": SUBNETS[zone], "AvailabilityZone": zone},
    }


def instance(instance_id, instance_type, zone, lifecycle=None):
    item = {
        "InstanceId": instance_id,
        "InstanceType": instance_type,
        "Placement": {"AvailabilityZone": zone},
        "PrivateDnsName": "ip-10-0-1-23.ap-south-1.compute.internal",
        "State": {"Code": 0, "Name": "pending"},
        "Architecture": "arm64",
        "LaunchTime": datetime(2026, 11, 30, 10, 0, tzinfo=UTC),
        "Tags": [{"Key": "groupless.dev/node-request", "Value": "req-stubbed"}],
    }
    if lifecycle:
        item["InstanceLifecycle"] = lifecycle
    return {"Reservations": [{"ReservationId": "r-1", "Instances": [item]}]}


def stub_prelude(stubber, first=True):
    """Calls before CreateFleet: the node-request look-up, then (first launch only) subnets, groups, template."""
    stubber.add_response("describe_instances", {"Reservations": []}, {"Filters": ANY})
    if not first:
        return
    stubber.add_response(
        "describe_subnets",
        {
            "Subnets": [
                {"SubnetId": SUBNETS[z], "AvailabilityZone": z, "AvailableIpAddressCount": 8000}
                for z in ZONES
            ]
        },
        {"Filters": [{"Name": "tag-key", "Values": ["kubernetes.io/cluster/karpenter-demo"]}]},
    )
    stubber.add_response(
        "describe_security_groups",
        {"SecurityGroups": [{"GroupId": "sg-0123456789abcdef0", "GroupName": "karpenter-demo-node"}]},
        {"Filters": ANY},
    )
    stubber.add_response(
        "describe_launch_templates",
        {
            "LaunchTemplates": [
                {"LaunchTemplateId": "lt-1", "LaunchTemplateName": "groupless/karpenter-demo/x"}
            ]
        },
        {"LaunchTemplateNames": ANY},
    )


def overrides_of(fleet):
    return [
        (o["InstanceType"], o["AvailabilityZone"])
        for c in fleet["LaunchTemplateConfigs"]
        for o in c["Overrides"]
    ]


def test_insufficient_capacity_is_cached_and_the_retry_uses_the_rest(stubbed, provisioner_with, clock):
    provider, stubber, fleets = stubbed
    labels = {"karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "ap-south-1a"}
    stub_prelude(stubber)
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-11111111-2222-3333-4444-555555555555",
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": override("m6g.xlarge", "ap-south-1a"),
                    "Lifecycle": "on-demand",
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": ICE_MESSAGE.replace("r6gd", "m6g"),
                },
                {
                    "LaunchTemplateAndOverrides": override("r6gd.xlarge", "ap-south-1a"),
                    "Lifecycle": "on-demand",
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": ICE_MESSAGE,
                },
            ],
            "Instances": [],
        },
        {
            **{
                k: ANY
                for k in ("Type", "ClientToken", "TargetCapacitySpecification", "LaunchTemplateConfigs")
            },
            "TagSpecifications": ANY,
            "OnDemandOptions": {"AllocationStrategy": "lowest-price"},
        },
    )
    with pytest.raises(InsufficientCapacityError) as error:
        provider.create(request(provisioner_with, [M6G, R6GD], labels))
    assert error.value.offerings == (
        ("m6g.xlarge", "ap-south-1a", "on-demand"),
        ("r6gd.xlarge", "ap-south-1a", "on-demand"),
    )
    assert overrides_of(fleets[0]) == [("m6g.xlarge", "ap-south-1a"), ("r6gd.xlarge", "ap-south-1a")]
    assert provider.unavailable.is_unavailable("r6gd.xlarge", "ap-south-1a", "on-demand")

    # the caller retries with the zone opened up: only the offerings not in the ICE cache are tried
    stub_prelude(stubber, first=False)
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-22222222-2222-3333-4444-555555555555",
            "Errors": [],
            "Instances": [
                {
                    "LaunchTemplateAndOverrides": override("m6g.xlarge", "ap-south-1b"),
                    "Lifecycle": "on-demand",
                    "InstanceIds": ["i-0a1b2c3d4e5f60718"],
                    "InstanceType": "m6g.xlarge",
                    "Platform": "Linux/UNIX",
                }
            ],
        },
    )
    stubber.add_response(
        "describe_instances",
        instance("i-0a1b2c3d4e5f60718", "m6g.xlarge", "ap-south-1b"),
        {"InstanceIds": ANY},
    )
    machine = provider.create(
        request(provisioner_with, [M6G, R6GD], {"karpenter.sh/capacity-type": "on-demand"})
    )
    assert overrides_of(fleets[1]) == [("m6g.xlarge", "ap-south-1b"), ("r6gd.xlarge", "ap-south-1b")]
    assert fleets[0]["ClientToken"] != fleets[1]["ClientToken"]
    assert (machine.instance_type, machine.zone, machine.capacity_type) == (
        "m6g.xlarge",
        "ap-south-1b",
        "on-demand",
    )

    clock.advance(180)
    assert not provider.unavailable.is_unavailable("r6gd.xlarge", "ap-south-1a", "on-demand")


def test_partial_fleet_reports_per_offering(stubbed, provisioner_with, caplog):
    provider, stubber, _ = stubbed
    stub_prelude(stubber)
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-33333333-2222-3333-4444-555555555555",
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": override("r6gd.xlarge", "ap-south-1a"),
                    "Lifecycle": "spot",
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "There is no Spot capacity available that matches your request.",
                }
            ],
            "Instances": [
                {
                    "LaunchTemplateAndOverrides": override("r6gd.xlarge", "ap-south-1b"),
                    "Lifecycle": "spot",
                    "InstanceIds": ["i-0f1e2d3c4b5a69788"],
                    "InstanceType": "r6gd.xlarge",
                }
            ],
        },
    )
    stubber.add_response(
        "describe_instances",
        instance("i-0f1e2d3c4b5a69788", "r6gd.xlarge", "ap-south-1b", "spot"),
        {"InstanceIds": ANY},
    )
    with caplog.at_level(logging.INFO):
        machine = provider.create(request(provisioner_with, [R6GD], {}))
    assert (machine.zone, machine.capacity_type) == ("ap-south-1b", "spot")
    assert provider.unavailable.is_unavailable("r6gd.xlarge", "ap-south-1a", "spot")
    assert "r6gd.xlarge/ap-south-1a/spot: InsufficientInstanceCapacity" in caplog.text


def test_throttling_is_retried_with_backoff_on_the_clock(stubbed, provisioner_with, clock):
    provider, stubber, fleets = stubbed
    stub_prelude(stubber)
    for _ in range(2):
        stubber.add_client_error(
            "create_fleet",
            service_error_code="RequestLimitExceeded",
            service_message="Request limit exceeded.",
            http_status_code=503,
        )
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-44444444-2222-3333-4444-555555555555",
            "Instances": [
                {
                    "LaunchTemplateAndOverrides": override("r6gd.xlarge", "ap-south-1a"),
                    "Lifecycle": "on-demand",
                    "InstanceIds": ["i-0123456789abcdef1"],
                    "InstanceType": "r6gd.xlarge",
                }
            ],
        },
    )
    stubber.add_response(
        "describe_instances",
        instance("i-0123456789abcdef1", "r6gd.xlarge", "ap-south-1a"),
        {"InstanceIds": ANY},
    )
    start = clock.now()
    machine = provider.create(request(provisioner_with, [R6GD], {"karpenter.sh/capacity-type": "on-demand"}))
    assert machine.instance_id == "i-0123456789abcdef1"
    assert clock.now() - start == pytest.approx(0.5 + 1.0)
    assert len(fleets) == 3 and len({f["ClientToken"] for f in fleets}) == 1


def test_throttling_that_does_not_stop_is_a_launch_error(stubbed, provisioner_with):
    provider, stubber, _ = stubbed
    stub_prelude(stubber)
    for _ in range(4):
        stubber.add_client_error(
            "create_fleet", service_error_code="RequestLimitExceeded", http_status_code=503
        )
    with pytest.raises(LaunchError) as error:
        provider.create(request(provisioner_with, [R6GD], {"karpenter.sh/capacity-type": "on-demand"}))
    assert isinstance(error.value.__cause__, ClientError)
    assert error.value.__cause__.response["Error"]["Code"] == "RequestLimitExceeded"


def test_fleet_error_other_than_capacity_is_a_launch_error(stubbed, provisioner_with):
    provider, stubber, _ = stubbed
    stub_prelude(stubber)
    stubber.add_response(
        "create_fleet",
        {
            "FleetId": "fleet-55555555-2222-3333-4444-555555555555",
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": override("r6gd.xlarge", "ap-south-1a"),
                    "Lifecycle": "on-demand",
                    "ErrorCode": "InvalidParameterValue",
                    "ErrorMessage": "Value (KarpenterNodeInstanceProfile-x) for parameter iamInstanceProfile.name is invalid.",
                }
            ],
            "Instances": [],
        },
    )
    with pytest.raises(LaunchError, match="InvalidParameterValue"):
        provider.create(request(provisioner_with, [R6GD], {"karpenter.sh/capacity-type": "on-demand"}))
    assert not provider.unavailable.is_unavailable("r6gd.xlarge", "ap-south-1a", "on-demand")


# ----------------------------------------------------------------------------- pricing
def price_list_entry(instance_type, usd):
    sku = "JRTCKXETXF"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": "ap-south-1",
                    "location": "Asia Pacific (Mumbai)",
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                },
                "sku": "ABCDEFGH12345678",
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"ABCDEFGH12345678.{sku}": {
                        "offerTermCode": sku,
                        "sku": "ABCDEFGH12345678",
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "priceDimensions": {
                            f"ABCDEFGH12345678.{sku}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "description": f"$ {usd} per On Demand Linux {instance_type} Instance Hour",
                                "pricePerUnit": {"USD": f"{usd:.10f}"},
                                "appliesTo": [],
                                "beginRange": "0",
                                "endRange": "Inf",
                            }
                        },
                        "termAttributes": {},
                    }
                }
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def test_pricing_api_and_spot_history(clock, tmp_path):
    pricing = boto_client("pricing")
    ec2 = boto_client("ec2")
    pricing_file = tmp_path / "prices.json"
    pricing_file.write_text(json.dumps({"ap-south-1": {"on-demand": {"m5.large": 0.5}}}))
    with Stubber(pricing) as pricing_stub, Stubber(ec2) as ec2_stub:
        pricing_stub.add_response(
            "get_products",
            {
                "FormatVersion": "aws_v1",
                "PriceList": [price_list_entry("r6gd.xlarge", 0.2504), price_list_entry("m5.large", 0.101)],
            },
            {
                "ServiceCode": "AmazonEC2",
                "Filters": get_products_filters("ap-south-1"),
                "FormatVersion": "aws_v1",
            },
        )
        ec2_stub.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    {
                        "AvailabilityZone": "ap-south-1a",
                        "InstanceType": "r6gd.xlarge",
                        "ProductDescription": "Linux/UNIX",
                        "SpotPrice": "0.090400",
                        "Timestamp": datetime(2026, 11, 30, 8, 0, tzinfo=UTC),
                    },
                    {
                        "AvailabilityZone": "ap-south-1a",
                        "InstanceType": "r6gd.xlarge",
                        "ProductDescription": "Linux/UNIX",
                        "SpotPrice": "0.071200",
                        "Timestamp": datetime(2026, 11, 30, 9, 30, tzinfo=UTC),
                    },
                    {
                        "AvailabilityZone": "ap-south-1b",
                        "InstanceType": "r6gd.xlarge",
                        "ProductDescription": "Linux/UNIX",
                        "SpotPrice": "0.00001",
                        "Timestamp": datetime(2026, 11, 30, 9, 30, tzinfo=UTC),
                    },
                ],
                "NextToken": "",
            },
            {"ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], "StartTime": ANY},
        )
        prices = PricingProvider("ap-south-1", ec2, pricing, clock, str(pricing_file))
        assert prices.book().on_demand_price("r6gd.xlarge") == 0.2304  # static table before any refresh
        prices.refresh()
    book = prices.book()
    assert book.on_demand_price("r6gd.xlarge") == 0.2504
    assert book.on_demand_price("m5.large") == 0.5  # the pricing file wins
    assert book.spot_price("r6gd.xlarge", "ap-south-1a") == 0.0712  # latest timestamp wins
    assert book.spot_price("r6gd.xlarge", "ap-south-1b") is None  # placeholder price ignored


def test_pricing_failure_keeps_prices_and_warns_once(clock, caplog):
    pricing = boto_client("pricing")
    with Stubber(pricing) as stub:
        for _ in range(2):
            stub.add_client_error(
                "get_products", service_error_code="AccessDeniedException", http_status_code=400
            )
        prices = PricingProvider("ap-south-1", None, pricing, clock)
        with caplog.at_level(logging.WARNING):
            assert prices.refresh_on_demand() is False
            assert prices.refresh_on_demand() is False
    assert prices.book().on_demand_price("m5.large") == 0.096
    assert len([r for r in caplog.records if "Failed to refresh on-demand prices" in r.getMessage()]) == 1


def test_background_refresh_starts_and_stops(clock):
    ec2 = boto_client("ec2")
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    {
                        "AvailabilityZone": "ap-south-1c",
                        "InstanceType": "m5.large",
                        "ProductDescription": "Linux/UNIX",
                        "SpotPrice": "0.0391",
                        "Timestamp": datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
                    },
                ],
            },
        )
        prices = PricingProvider("ap-south-1", ec2, None, clock)
        prices.start()
        try:
            for _ in range(200):
                if prices.book().spot_price("m5.large", "ap-south-1c") is not None:
                    break
                time.sleep(0.01)
        finally:
            prices.stop()
    assert prices.book().spot_price("m5.large", "ap-south-1c") == 0.0391
