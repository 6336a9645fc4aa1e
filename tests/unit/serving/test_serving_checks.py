"""Servers check their certificate, key, client CA and listen address before anything listens or logs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import extender.cli as extender_cli
import provisioner.serving as serving
import webhook.cli as webhook_cli
from certs.bundle import generate
from provisioner.cli import main


@pytest.fixture(autouse=True)
def no_gunicorn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record what would be served instead of starting gunicorn; keep pytest's log handlers."""
    started: list[dict[str, Any]] = []

    class Recorded:
        def __init__(self, app: Any, options: dict[str, Any]) -> None:
            started.append(options)

        def run(self) -> None:
            return None

    monkeypatch.setattr(serving, "_application", Recorded)
    monkeypatch.delenv("KUBECONFIG", raising=False)  # the extender then starts with an empty state
    monkeypatch.setattr(webhook_cli, "configure_logging", lambda *args: None)
    monkeypatch.setattr(extender_cli, "configure_logging", lambda *args: None)
    return started


@pytest.fixture
def pairs(tmp_path: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    return generate(["a"]).write(tmp_path / "a"), generate(["b"]).write(tmp_path / "b")


def test_a_matching_pair_and_client_ca_load(pairs: tuple[dict[str, Path], dict[str, Path]]) -> None:
    a, _ = pairs
    serving.check_tls_files(str(a["tls.crt"]), str(a["tls.key"]), str(a["ca.crt"]))
    options = serving.tls_options(str(a["tls.crt"]), str(a["tls.key"]), str(a["ca.crt"]))
    assert (options["certfile"], options["keyfile"], options["ca_certs"]) == (
        str(a["tls.crt"]), str(a["tls.key"]), str(a["ca.crt"]))


def test_each_wrong_file_is_named(pairs: tuple[dict[str, Path], dict[str, Path]]) -> None:
    a, b = pairs
    crt, key, other_key, ca = str(a["tls.crt"]), str(a["tls.key"]), str(b["tls.key"]), str(a["ca.crt"])
    with pytest.raises(serving.ServingError) as error:
        serving.check_tls_files(crt, other_key)
    assert str(error.value) == (f"--tls-key-file {other_key!r} is not the key of the certificate in --tls-cert-file "
                                f"{crt!r} (swapped files, or a key from another certificate?)")
    with pytest.raises(serving.ServingError) as error:
        serving.check_tls_files(key, crt)  # swapped
    assert str(error.value) == (
        f"--tls-cert-file {key!r}: no PEM certificate in it (it holds a private key: swapped with --tls-key-file?)")
    with pytest.raises(serving.ServingError) as error:
        serving.check_tls_files(crt, ca)  # a certificate where the key should be
    assert str(error.value) == f"--tls-key-file {ca!r}: no unencrypted PEM private key in it"
    with pytest.raises(serving.ServingError) as error:
        serving.check_tls_files(crt, key, key)
    assert str(error.value).startswith(f"--client-ca-file {key!r}: no PEM CA certificate in it")


@pytest.mark.parametrize("command", ["webhook", "extender"])
def test_servers_exit_2_on_a_mismatched_key_without_serving(
    command: str, pairs: tuple[dict[str, Path], dict[str, Path]], no_gunicorn: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = pairs
    with caplog.at_level(logging.INFO):
        code = main([command, "--listen", "127.0.0.1:0", "--tls-cert-file", str(a["tls.crt"]),
                     "--tls-key-file", str(b["tls.key"])])
    assert code == 2
    assert no_gunicorn == []
    assert capsys.readouterr().err == (
        f"groupless {command}: --tls-key-file '{b['tls.key']}' is not the key of the certificate in "
        f"--tls-cert-file '{a['tls.crt']}' (swapped files, or a key from another certificate?)\n")
    assert not [r for r in caplog.records if "Serving" in r.getMessage()]


def test_extender_rejects_the_listen_address_before_saying_it_serves(
    pairs: tuple[dict[str, Path], dict[str, Path]], no_gunicorn: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    a, _ = pairs
    with caplog.at_level(logging.INFO):
        code = main(["extender", "--listen", "foo", "--tls-cert-file", str(a["tls.crt"]),
                     "--tls-key-file", str(a["tls.key"])])
    assert code == 2
    assert capsys.readouterr().err == (
        "groupless extender: --listen 'foo': expected HOST:PORT, e.g. 0.0.0.0:8443 or [::]:8443\n")
    assert [r.getMessage() for r in caplog.records if "Serving" in r.getMessage()] == []
    assert no_gunicorn == []


def test_extender_serves_a_good_pair(
    pairs: tuple[dict[str, Path], dict[str, Path]], no_gunicorn: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, _ = pairs
    with caplog.at_level(logging.INFO):
        assert main(["extender", "--listen", "127.0.0.1:9999", "--tls-cert-file", str(a["tls.crt"]),
                     "--tls-key-file", str(a["tls.key"])]) == 0
    assert [options["bind"] for options in no_gunicorn] == [["127.0.0.1:9999"]]
    assert "Serving the scheduler extender on https://127.0.0.1:9999" in caplog.text
