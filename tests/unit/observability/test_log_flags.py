"""The controller, the webhook and the extender take the same log levels and formats, and reject bad ones alike."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import provisioner.serving as serving
from certs.bundle import generate
from provisioner.cli import main
from provisioner.logging import LEVEL_NAMES, parse_level
from provisioner.settings import from_mapping


@pytest.fixture(autouse=True)
def restore_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("GROUPLESS_LOG_LEVEL", raising=False)
    monkeypatch.delenv("GROUPLESS_LOG_FORMAT", raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Each process's command line, complete enough that only the log settings can fail."""
    served: list[str] = []
    monkeypatch.setattr(serving, "serve", lambda app, **kwargs: served.append(app.name))
    paths = generate(["localhost"]).write(tmp_path)
    tls = ["--tls-cert-file", str(paths["tls.crt"]), "--tls-key-file", str(paths["tls.key"])]
    return {
        "controller": ["controller", "--cloud-provider", "fake"],
        "webhook": ["webhook", *tls],
        "extender": ["extender", *tls],
    }


@pytest.mark.parametrize("process", ["controller", "webhook", "extender"])
@pytest.mark.parametrize(("env", "flags", "error"), [
    ({"GROUPLESS_LOG_LEVEL": "loud"}, [],
     "GROUPLESS_LOG_LEVEL (--log-level / GROUPLESS_LOG_LEVEL): expected one of debug, info, warning, error, "
     "got 'loud'"),
    ({"GROUPLESS_LOG_LEVEL": "critical"}, [],
     "GROUPLESS_LOG_LEVEL (--log-level / GROUPLESS_LOG_LEVEL): expected one of debug, info, warning, error, "
     "got 'critical'"),
    ({}, ["--log-level", "warn"],
     "--log-level (--log-level / GROUPLESS_LOG_LEVEL): expected one of debug, info, warning, error, got 'warn'"),
    ({"GROUPLESS_LOG_FORMAT": "xml"}, [],
     "GROUPLESS_LOG_FORMAT (--log-format / GROUPLESS_LOG_FORMAT): expected one of text, json, got 'xml'"),
    ({}, ["--log-format", "xml"],
     "--log-format (--log-format / GROUPLESS_LOG_FORMAT): expected one of text, json, got 'xml'"),
])
def test_bad_log_settings_give_the_same_one_line_error_and_exit_2(
    process: str, env: dict[str, str], flags: list[str], error: str, commands: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main([*commands[process], *flags]) == 2
    assert capsys.readouterr().err == f"groupless {process}: {error}\n"


def test_every_process_accepts_every_level_in_any_case() -> None:
    for name in LEVEL_NAMES:
        assert from_mapping({"log_level": name.upper()}).logging.level == name
        assert parse_level(name.upper()) == getattr(logging, name.upper())


@pytest.mark.parametrize("process", ["webhook", "extender"])
def test_servers_take_the_level_from_the_environment(
    process: str, commands: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUPLESS_LOG_LEVEL", "Error")
    assert main(commands[process]) == 0
    assert logging.getLogger().level == logging.ERROR
