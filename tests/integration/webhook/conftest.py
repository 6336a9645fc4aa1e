"""The webhook's flask app behind a test client, for the fuzz (thousands of bodies through the HTTP layer)."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from webhook.app import create_app


@pytest.fixture(scope="session")
def client() -> FlaskClient:
    return create_app().test_client()
