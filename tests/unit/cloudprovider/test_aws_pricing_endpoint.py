"""The Pricing API client: its own endpoint, never the EC2 override; one-line refresh warnings.

With ``--aws-endpoint-url`` (a moto server, an EC2 VPC endpoint) the Pricing API client keeps
its own endpoint: a moto server answers GetProducts with a 500 HTML page, which a refresh
warning must not log whole.
"""

from __future__ import annotations

import logging
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from provisioner.clock import FakeClock
from provisioner.cloudprovider.aws.pricing import MAX_ERROR_CHARS, PricingProvider, summarize_error
from provisioner.cloudprovider.aws.provider import AWSCloudProvider
from provisioner.cloudprovider.aws.settings import AWSSettings
from provisioner.settings import from_mapping

EC2_OVERRIDE = "http://127.0.0.1:5000"
PRICING_OVERRIDE = "http://127.0.0.1:5001"


class RecordingSession:
    """A boto3 session that records the clients asked of it."""

    def __init__(self) -> None:
        self.session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
        self.clients: dict[str, Any] = {}

    def client(self, service: str, **kwargs: Any) -> Any:
        made = self.session.client(service, **kwargs)
        self.clients[service] = made
        return made


def build(caplog: pytest.LogCaptureFixture, **overrides: Any) -> tuple[AWSCloudProvider, RecordingSession]:
    caplog.set_level(logging.INFO, logger="provisioner.cloudprovider.aws")
    session = RecordingSession()
    settings = AWSSettings(cluster_name="demo", region="ap-south-1", **overrides)
    provider = AWSCloudProvider.from_settings(settings, session, FakeClock())  # type: ignore[arg-type]
    return provider, session


def test_ec2_override_alone_means_no_pricing_api_and_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    provider, session = build(caplog, endpoint_url=EC2_OVERRIDE)
    assert session.clients["ec2"].meta.endpoint_url == EC2_OVERRIDE
    assert session.clients["ssm"].meta.endpoint_url == EC2_OVERRIDE
    assert "pricing" not in session.clients
    assert provider.pricing.refresh_on_demand() is False  # nothing to call
    lines = [r for r in caplog.records if "Pricing API" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.INFO]
    assert "static table" in lines[0].getMessage() and "--aws-pricing-endpoint-url" in lines[0].getMessage()
    assert provider.pricing.book().on_demand["m5.large"] > 0  # the static table


def test_pricing_endpoint_override_is_used_for_pricing_only(caplog: pytest.LogCaptureFixture) -> None:
    _, session = build(caplog, endpoint_url=EC2_OVERRIDE, pricing_endpoint_url=PRICING_OVERRIDE)
    assert session.clients["pricing"].meta.endpoint_url == PRICING_OVERRIDE
    assert session.clients["pricing"].meta.region_name == "ap-south-1"
    assert session.clients["ec2"].meta.endpoint_url == EC2_OVERRIDE


def test_without_overrides_pricing_uses_its_own_aws_endpoint(caplog: pytest.LogCaptureFixture) -> None:
    _, session = build(caplog)
    assert session.clients["pricing"].meta.endpoint_url == "https://api.pricing.ap-south-1.amazonaws.com"
    assert session.clients["ec2"].meta.endpoint_url == "https://ec2.ap-south-1.amazonaws.com"


def test_pricing_api_off_creates_no_client_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    _, session = build(caplog, endpoint_url=EC2_OVERRIDE, pricing_api=False)
    assert "pricing" not in session.clients
    assert not [r for r in caplog.records if "Pricing API" in r.getMessage()]


def test_setting_reaches_the_provider_from_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-south-1")  # the region comes from the SDK's chain when unset
    settings = from_mapping({"aws_endpoint_url": EC2_OVERRIDE},
                            environ={"GROUPLESS_AWS_PRICING_ENDPOINT_URL": PRICING_OVERRIDE})
    aws = AWSSettings.from_controller_settings(settings)
    assert (aws.endpoint_url, aws.pricing_endpoint_url, aws.uses_pricing_api) == (EC2_OVERRIDE, PRICING_OVERRIDE, True)
    assert AWSSettings.from_controller_settings(from_mapping({"aws_endpoint_url": EC2_OVERRIDE})).uses_pricing_api is False
    assert AWSSettings.from_controller_settings(from_mapping({})).pricing_endpoint_url is None


HTML = "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error</h1>\n"


def test_an_html_error_page_is_summarised_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="provisioner.cloudprovider.aws.pricing")
    client = boto3.client("pricing", region_name="ap-south-1", aws_access_key_id="t", aws_secret_access_key="t")
    prices = PricingProvider("ap-south-1", None, client, FakeClock())
    with Stubber(client) as stub:
        stub.add_client_error("get_products", service_error_code="500", service_message=HTML, http_status_code=500)
        stub.add_client_error("get_products", service_error_code="500", service_message=HTML, http_status_code=500)
        assert prices.refresh_on_demand() is False
        assert prices.refresh_on_demand() is False  # the streak is logged once
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "\n" not in message and "<" not in message
    assert message == ("Failed to refresh on-demand prices for ap-south-1, keeping the previous ones: "
                       "GetProducts failed: 500 (HTTP 500) (HTML error page omitted)")


def test_a_long_or_multi_line_message_is_cut_to_its_first_line() -> None:
    error = ClientError({"Error": {"Code": "ThrottlingException", "Message": "x" * 500 + "\nmore"},
                         "ResponseMetadata": {"HTTPStatusCode": 400}}, "GetProducts")
    summary = summarize_error(error)
    assert summary == "GetProducts failed: ThrottlingException (HTTP 400): " + "x" * MAX_ERROR_CHARS + "..."
    assert summarize_error(ValueError("bad\npage")) == "ValueError: bad..."
    assert summarize_error(ValueError("the Pricing API returned no EC2 prices")) == (
        "ValueError: the Pricing API returned no EC2 prices")


def test_clients_keep_more_connections_than_the_launch_parallelism(caplog: pytest.LogCaptureFixture) -> None:
    # 16 concurrent launches through botocore's default pool of 10 discarded connections
    # ("Connection pool is full") in every e2e burst
    _, session = build(caplog, endpoint_url=EC2_OVERRIDE)
    assert session.clients["ec2"].meta.config.max_pool_connections == 32
    assert session.clients["ssm"].meta.config.max_pool_connections == 32
