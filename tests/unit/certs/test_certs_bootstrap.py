"""Self-bootstrap against the in-memory KubeAPI: Secret created once, caBundle injected, renewals."""

from __future__ import annotations

import base64
import datetime
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.bootstrap import (
    DEFAULT_CONFIGURATIONS,
    MUTATING,
    VALIDATING,
    ensure_certificates,
    ensure_secret,
    inject_ca_bundle,
    keep_fresh,
)
from certs.bundle import CertBundle, generate, service_dns_names
from provisioner.kube.fake import FakeKubeAPI
from tests.builders.expectations import eventually

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NOW = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.UTC)
NAMES = service_dns_names("groupless", "groupless")


def cluster_with_configurations() -> FakeKubeAPI:
    kube = FakeKubeAPI()
    for doc in yaml.safe_load_all((DEPLOY / "webhooks" / "webhooks.yaml").read_text()):
        kube.create(doc["kind"], doc)
    return kube


def ca_bundles(kube: FakeKubeAPI) -> list[str | None]:
    return [webhook["clientConfig"].get("caBundle")
            for kind, name in DEFAULT_CONFIGURATIONS for webhook in kube.get(kind, name)["webhooks"]]


def test_first_start_creates_the_secret_writes_files_and_injects_the_ca(tmp_path: Path) -> None:
    kube = cluster_with_configurations()
    result = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES, now=NOW)
    assert result.created is True
    assert result.patched == ("defaulting.webhook.provisioners.groupless.dev",
                              "validation.webhook.provisioners.groupless.dev")
    secret = kube.get("Secret", "groupless-cert", "groupless")
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert base64.b64decode(secret["data"]["tls.crt"]) == result.bundle.cert
    assert CertBundle.read(tmp_path) == result.bundle
    assert result.bundle.names()[0] == frozenset(NAMES)
    encoded = base64.b64encode(result.bundle.ca_cert).decode()
    assert ca_bundles(kube) == [encoded, encoded]
    # the service reference is untouched
    assert kube.get(MUTATING, DEFAULT_CONFIGURATIONS[0][1])["webhooks"][0]["clientConfig"]["service"] == {
        "name": "groupless", "namespace": "groupless", "path": "/mutate", "port": 443}


def test_second_start_reuses_the_secret_and_patches_nothing(tmp_path: Path) -> None:
    kube = cluster_with_configurations()
    first = ensure_certificates(kube, cert_dir=str(tmp_path / "a"), dns_names=NAMES, now=NOW)
    version = kube.get("Secret", "groupless-cert", "groupless")["metadata"]["resourceVersion"]
    second = ensure_certificates(kube, cert_dir=str(tmp_path / "b"), dns_names=NAMES, now=NOW)
    assert (second.created, second.patched, second.bundle) == (False, (), first.bundle)
    assert kube.get("Secret", "groupless-cert", "groupless")["metadata"]["resourceVersion"] == version
    assert CertBundle.read(tmp_path / "b") == first.bundle


def test_a_new_name_or_a_close_expiry_renews_the_serving_certificate_with_the_same_ca(tmp_path: Path) -> None:
    kube = cluster_with_configurations()
    first = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES, now=NOW)
    renamed = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=[*NAMES, "webhook.example.com"], now=NOW)
    assert renamed.created is True and renamed.bundle.cert != first.bundle.cert
    assert "webhook.example.com" in renamed.bundle.names()[0]
    assert (renamed.bundle.ca_cert, renamed.bundle.ca_key) == (first.bundle.ca_cert, first.bundle.ca_key)
    assert renamed.patched == ()  # every caBundle stays valid: no window where other replicas are untrusted
    renamed.bundle.certificate().verify_directly_issued_by(first.bundle.ca_certificate())
    assert CertBundle.read(tmp_path) == renamed.bundle
    later = NOW + datetime.timedelta(days=300)
    expiring = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES, now=later)
    assert expiring.created is True and expiring.bundle.ca_cert == first.bundle.ca_cert
    assert expiring.bundle.certificate().not_valid_after_utc == later + datetime.timedelta(days=365)


def test_a_ca_close_to_its_end_is_replaced_and_injected(tmp_path: Path) -> None:
    kube = cluster_with_configurations()
    first = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES, now=NOW)
    late = NOW + datetime.timedelta(days=3650 - 200)
    result = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES, now=late)
    assert result.created is True and result.bundle.ca_cert != first.bundle.ca_cert
    assert len(result.patched) == 2
    assert ca_bundles(kube) == [base64.b64encode(result.bundle.ca_cert).decode()] * 2


def test_keep_fresh_heals_a_reset_ca_bundle(tmp_path: Path) -> None:
    kube = cluster_with_configurations()
    first = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES)
    kube.patch(MUTATING, DEFAULT_CONFIGURATIONS[0][1],
               [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}])
    stop = threading.Event()
    thread = keep_fresh(kube, stop, interval_seconds=0.01, cert_dir=str(tmp_path), dns_names=NAMES)
    healed = eventually(lambda: ca_bundles(kube)[0] != "", timeout=10)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert healed
    assert ca_bundles(kube) == [base64.b64encode(first.bundle.ca_cert).decode()] * 2


def test_a_corrupt_secret_is_replaced() -> None:
    kube = FakeKubeAPI()
    kube.create("Secret", {"metadata": {"name": "groupless-cert", "namespace": "groupless"},
                           "data": {"tls.crt": base64.b64encode(b"junk").decode()}})
    bundle, created = ensure_secret(kube, namespace="groupless", secret_name="groupless-cert", dns_names=NAMES)
    assert created is True
    stored = kube.get("Secret", "groupless-cert", "groupless")
    assert base64.b64decode(stored["data"]["ca.crt"]) == bundle.ca_cert


class RacingKube(FakeKubeAPI):
    """Another replica creates the Secret between our get and our create."""

    def __init__(self, winner: CertBundle) -> None:
        super().__init__()
        self.winner = winner

    def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        if kind == "Secret" and self.winner is not None:
            winner, self.winner = self.winner, None  # type: ignore[assignment]
            super().create(kind, {"metadata": dict(obj["metadata"]), "data": {
                k: base64.b64encode(v).decode() for k, v in winner.to_files().items()}})
        return super().create(kind, obj)


def test_losing_the_create_race_uses_the_winners_bundle() -> None:
    winner = generate(NAMES)
    kube = RacingKube(winner)
    bundle, created = ensure_secret(kube, namespace="groupless", secret_name="groupless-cert", dns_names=NAMES)
    assert (bundle, created) == (winner, False)


def test_a_missing_configuration_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKubeAPI()
    with caplog.at_level(logging.WARNING, logger="certs.bootstrap"):
        result = ensure_certificates(kube, cert_dir=str(tmp_path), dns_names=NAMES)
    assert result.patched == ()
    assert [r.getMessage() for r in caplog.records] == [
        "MutatingWebhookConfiguration defaulting.webhook.provisioners.groupless.dev not found; its caBundle was not set",
        "ValidatingWebhookConfiguration validation.webhook.provisioners.groupless.dev not found; "
        "its caBundle was not set",
    ]


def test_inject_sets_every_webhook_of_a_configuration() -> None:
    kube = FakeKubeAPI()
    kube.create(VALIDATING, {"metadata": {"name": "v"}, "webhooks": [
        {"name": "a.example.com", "clientConfig": {"url": "https://127.0.0.1:1/a", "caBundle": "b2xk"}},
        {"name": "b.example.com", "clientConfig": {"url": "https://127.0.0.1:1/b"}},
    ]})
    assert inject_ca_bundle(kube, VALIDATING, "v", b"PEM") is True
    assert [w["clientConfig"]["caBundle"] for w in kube.get(VALIDATING, "v")["webhooks"]] == ["UEVN", "UEVN"]
    assert inject_ca_bundle(kube, VALIDATING, "v", b"PEM") is False
