"""Thousands of malformed and random bodies through the HTTP layer: no 5xx, every answer well-formed."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings

from provisioner import metrics
from tests.builders.admission_strategies import BODIES, check_answer

#: 4,200 requests take about a minute on 2 idle cores and up to twice that under load
pytestmark = pytest.mark.timeout(300)

FUZZ = settings(max_examples=2100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def internal_errors() -> float:
    """Requests that reached the app's last-resort handler (an exception in the webhook code)."""
    return sum(
        sample.value
        for metric in metrics.WEBHOOK_DURATION.collect()
        for sample in metric.samples
        if sample.name.endswith("_count") and sample.labels.get("allowed") == "error"
    )


def test_random_bodies_to_mutate_and_validate(client: FlaskClient) -> None:
    errors_before = internal_errors()
    sent: list[int] = []

    @FUZZ
    @given(body=BODIES)
    def each(body: bytes) -> None:
        for path in ("/mutate", "/validate"):
            reply = client.post(path, data=body, content_type="application/json")
            check_answer(reply.status_code, reply.get_data(), body)
        sent.append(len(body))

    each()
    assert len(sent) >= 2000  # bodies, each to both endpoints
    assert internal_errors() == errors_before
