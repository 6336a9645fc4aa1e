"""Fixtures for the webhook tests: a flask test client and a poster that checks the envelope."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from webhook.app import create_app


@pytest.fixture(scope="session")
def client() -> FlaskClient:
    return create_app().test_client()


Post = Callable[[str, Any], dict[str, Any]]


@pytest.fixture
def post(client: FlaskClient) -> Post:
    """POST a body (a dict is JSON-encoded) and return the AdmissionReview answer (asserting 200)."""

    def _post(path: str, body: Any) -> dict[str, Any]:
        reply = client.post(path, data=json.dumps(body), content_type="application/json")
        assert reply.status_code == 200, reply.data
        answer: dict[str, Any] = reply.get_json()
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        return answer

    return _post
