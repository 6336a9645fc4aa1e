"""gunicorn's own error and access lines follow --log-format and --log-level."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from gunicorn.config import Config

from provisioner.logging import configure_logging
from provisioner.serving import gunicorn_options


@pytest.fixture(autouse=True)
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def gunicorn_logger(access_log: bool) -> object:
    cfg = Config()
    for key, value in gunicorn_options(listen="127.0.0.1:0", cert_file=None, key_file=None,
                                       access_log=access_log).items():
        cfg.set(key, value)
    return cfg.logger_class(cfg)


def test_error_and_access_lines_are_json_at_the_chosen_level() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    log = gunicorn_logger(access_log=True)
    log.info("Listening at: %s", "https://127.0.0.1:8443")  # type: ignore[attr-defined]
    log.debug("not shown at info")  # type: ignore[attr-defined]
    log.access_log.info("GET /healthz 200")  # type: ignore[attr-defined]
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(r["logger"], r["level"], r["message"]) for r in records] == [
        ("gunicorn.error", "info", "Listening at: https://127.0.0.1:8443"),
        ("gunicorn.access", "info", "GET /healthz 200"),
    ]


def test_gunicorn_level_follows_the_root_level() -> None:
    stream = io.StringIO()
    configure_logging("error", "text", stream=stream)
    assert gunicorn_options(listen=":1", cert_file=None, key_file=None)["loglevel"] == "error"
    log = gunicorn_logger(access_log=False)
    log.info("Booting worker with pid: 1")  # type: ignore[attr-defined]
    log.error("Worker timeout")  # type: ignore[attr-defined]
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" ERROR gunicorn.error Worker timeout")
