"""aws.pricingEndpointURL reaches the controller as GROUPLESS_AWS_PRICING_ENDPOINT_URL, read by the real settings loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provisioner import settings
from provisioner.cli import build_parser

from .test_chart import REQUIRED, by_kind, helm, render

__all__ = ["helm"]  # the module-scoped fixture, shared with test_chart


def controller_settings(objects: list[dict[str, Any]]) -> tuple[dict[str, str], settings.ControllerSettings]:
    """The controller container's literal GROUPLESS_* variables, and the settings its args and those give."""
    deployment = by_kind(objects, "Deployment")[0]
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "controller")
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    args = build_parser().parse_args(container["args"])
    return env, settings.from_args(args, environ=env)


def test_pricing_endpoint_is_rendered_and_parsed(helm: Path) -> None:
    objects = render(helm, *REQUIRED, "--set", "aws.endpointURL=http://moto.test:5000",
                     "--set", "aws.pricingEndpointURL=http://pricing.test:5001")
    env, parsed = controller_settings(objects)
    assert env["GROUPLESS_AWS_PRICING_ENDPOINT_URL"] == "http://pricing.test:5001"
    assert parsed.aws.pricing_endpoint_url == "http://pricing.test:5001"
    assert parsed.aws.endpoint_url == "http://moto.test:5000"


@pytest.mark.parametrize("extra", [[], ["--set", "aws.endpointURL=http://moto.test:5000"]])
def test_unset_pricing_endpoint_is_not_rendered(helm: Path, extra: list[str]) -> None:
    env, parsed = controller_settings(render(helm, *REQUIRED, *extra))
    assert "GROUPLESS_AWS_PRICING_ENDPOINT_URL" not in env
    assert parsed.aws.pricing_endpoint_url is None
    assert parsed.aws.endpoint_url == ("http://moto.test:5000" if extra else None)
