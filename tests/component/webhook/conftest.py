"""Fixtures: a running ``groupless webhook`` over HTTPS; the unit tests' builders on the path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The unit tests' AdmissionReview builders and hypothesis strategies.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "webhook"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from webhook_server import Server, start, stop  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(tmp_path_factory.mktemp("webhook-tls"))
    yield running
    stop(running)
