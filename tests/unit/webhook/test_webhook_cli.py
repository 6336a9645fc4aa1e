"""``groupless webhook``: flags reach the server; bootstrap mode makes and uses its own certificates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import provisioner.serving as serving
import webhook.cli as webhook_cli
from certs.bundle import CertBundle, generate
from provisioner.cli import main
from provisioner.kube import client as kube_client
from provisioner.kube.fake import FakeKubeAPI

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


@pytest.fixture(autouse=True)
def keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI configures the root logger; tests keep pytest's handlers instead."""
    monkeypatch.setattr(webhook_cli, "configure_logging", lambda *args: None)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_serve(app: Any, **kwargs: Any) -> None:
        calls.append({"app": app.name, **kwargs})

    monkeypatch.setattr(serving, "serve", fake_serve)
    return calls


def test_files_mode_passes_every_flag(served: list[dict[str, Any]], tmp_path: Path) -> None:
    paths = generate(["localhost"]).write(tmp_path)
    assert main(["webhook", "--listen", "127.0.0.1:9443", "--tls-cert-file", str(paths["tls.crt"]),
                 "--tls-key-file", str(paths["tls.key"]), "--client-ca-file", str(paths["ca.crt"]),
                 "--threads", "3"]) == 0
    assert served == [{"app": "groupless-webhook", "listen": "127.0.0.1:9443", "cert_file": str(paths["tls.crt"]),
                       "key_file": str(paths["tls.key"]), "client_ca_file": str(paths["ca.crt"]), "threads": 3,
                       "name": "groupless-webhook"}]


def test_no_certificate_is_an_error(served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["webhook", "--listen", "127.0.0.1:9443"]) == 2
    assert served == []
    assert capsys.readouterr().err == (
        "groupless webhook: --tls-cert-file and --tls-key-file are required (kube-apiserver only calls webhooks "
        "over HTTPS), or use --bootstrap-certs\n")


def test_bootstrap_mode_creates_certificates_and_serves_them(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kube = FakeKubeAPI()
    for doc in yaml.safe_load_all((DEPLOY / "webhooks" / "webhooks.yaml").read_text()):
        kube.create(doc["kind"], doc)
    kubeconfigs: list[str | None] = []

    def from_kubeconfig(path: str | None = None, **kwargs: Any) -> FakeKubeAPI:
        kubeconfigs.append(path)
        return kube

    monkeypatch.setattr(kube_client.KubeClient, "from_kubeconfig", staticmethod(from_kubeconfig))
    assert main(["webhook", "--bootstrap-certs", "--kubeconfig", "/k", "--cert-dir", str(tmp_path),
                 "--extra-ip", "127.0.0.1", "--cert-check-interval", "0"]) == 0
    assert kubeconfigs == ["/k"]
    assert served[0]["cert_file"] == f"{tmp_path}/tls.crt" and served[0]["key_file"] == f"{tmp_path}/tls.key"
    dns, ips = CertBundle.read(tmp_path).names()
    assert dns == {"groupless", "groupless.groupless", "groupless.groupless.svc",
                   "groupless.groupless.svc.cluster.local"}
    assert ips == {"127.0.0.1"}
    assert kube.get("Secret", "groupless-cert", "groupless")["data"]["tls.crt"]


def test_bad_listen_address_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = generate(["localhost"]).write(tmp_path)
    assert main(["webhook", "--listen", "localhost", "--tls-cert-file", str(paths["tls.crt"]),
                 "--tls-key-file", str(paths["tls.key"])]) == 2
    assert capsys.readouterr().err == (
        "groupless webhook: --listen 'localhost': expected HOST:PORT, e.g. 0.0.0.0:8443 or [::]:8443\n")


def test_serving_options() -> None:
    options = serving.gunicorn_options(listen=":8443", cert_file=None, key_file=None)
    assert (options["bind"], options["workers"], options["worker_class"], options["threads"]) == (
        ["0.0.0.0:8443"], 1, "gthread", 8)
    assert "certfile" not in options
    assert serving.parse_listen("[::1]:443") == "[::1]:443"
    with pytest.raises(serving.ServingError, match="must be given together"):
        serving.tls_options("a.crt", None, None)
    with pytest.raises(serving.ServingError, match="--tls-cert-file '/nonexistent/x': file does not exist"):
        serving.tls_options("/nonexistent/x", "/nonexistent/y", None)
    with pytest.raises(serving.ServingError, match="--client-ca-file needs"):
        serving.tls_options(None, None, "ca.crt")
