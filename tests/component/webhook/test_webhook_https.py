"""The webhook under gunicorn over real HTTPS, verified against the CA from ``groupless certs``."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest
import requests
from cryptography import x509
from hypothesis import HealthCheck, given, settings
from webhook_server import Server, start, stop

from certs.bundle import generate
from tests.builders.admission import decode_patch, load_walkthrough, review, valid
from tests.builders.admission_strategies import BODIES, check_answer


def test_walkthrough_provisioner_is_defaulted_and_admitted_over_https(server: Server) -> None:
    obj = load_walkthrough("01-provisioner.yaml")
    answer = requests.post(f"{server.url}/mutate", json=review(obj, uid="https-1"), verify=server.ca_file,
                           timeout=10)
    assert answer.status_code == 200
    response = answer.json()["response"]
    assert response["uid"] == "https-1" and response["allowed"] is True
    assert [op["path"] for op in decode_patch(response)] == ["/spec/provider/amiFamily",
                                                             "/spec/provider/metadataOptions"]
    answer = requests.post(f"{server.url}/validate", json=review(obj, uid="https-2"), verify=server.ca_file,
                           timeout=10)
    assert answer.json()["response"] == {"uid": "https-2", "allowed": True}


def test_invalid_provisioner_is_denied_with_our_message_over_https(server: Server) -> None:
    obj = valid()
    obj["spec"]["requirements"][1]["operator"] = "Equals"
    answer = requests.post(f"{server.url}/validate", json=review(obj, uid="https-3"), verify=server.ca_file,
                           timeout=10)
    assert answer.json()["response"] == {
        "uid": "https-3",
        "allowed": False,
        "status": {"status": "Failure", "code": 422, "reason": "Invalid",
                   "message": 'spec.requirements[1].operator: invalid value "Equals": must be one of In, NotIn, '
                              "Exists, DoesNotExist, Gt, Lt"},
    }


def test_consolidation_beside_ttl_seconds_after_empty_is_denied_naming_both_over_https(server: Server) -> None:
    obj = valid()  # it sets ttlSecondsAfterEmpty: 30
    obj["spec"]["consolidation"] = {"enabled": True}
    answer = requests.post(f"{server.url}/validate", json=review(obj, uid="https-4"), verify=server.ca_file,
                           timeout=10)
    assert answer.json()["response"] == {
        "uid": "https-4",
        "allowed": False,
        "status": {"status": "Failure", "code": 422, "reason": "Invalid",
                   "message": "spec.consolidation.enabled: invalid value true: expected exactly one, got both: "
                              "spec.consolidation.enabled and spec.ttlSecondsAfterEmpty (consolidation removes "
                              "empty nodes itself; unset ttlSecondsAfterEmpty)"},
    }
    del obj["spec"]["ttlSecondsAfterEmpty"]
    answer = requests.post(f"{server.url}/validate", json=review(obj, uid="https-5"), verify=server.ca_file,
                           timeout=10)
    assert answer.json()["response"] == {"uid": "https-5", "allowed": True}


def test_bad_body_is_400_over_https_and_keepalive_connection_survives(server: Server) -> None:
    with requests.Session() as session:
        # verify= per request: requests lets $REQUESTS_CA_BUNDLE override Session.verify
        first = session.post(f"{server.url}/validate", data=b"{", timeout=10, verify=server.ca_file)
        assert first.status_code == 400
        assert first.text.startswith("bad request: request body is not JSON")
        second = session.post(f"{server.url}/validate", json=review(valid()), timeout=10, verify=server.ca_file)
        assert second.json()["response"]["allowed"] is True


def test_a_client_trusting_another_ca_refuses_the_server(server: Server, tmp_path: Path) -> None:
    other = generate(["localhost"], ["127.0.0.1"]).write(tmp_path)
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{server.url}/healthz", verify=str(other["ca.crt"]), timeout=10)


# the client offers TLS 1.1 on purpose (ssl deprecates it) to see the server refuse it
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_the_server_speaks_tls_1_2_or_later_only(server: Server) -> None:
    context = ssl.create_default_context(cafile=server.ca_file)
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises((ssl.SSLError, OSError)):
        host, port = server.url.removeprefix("https://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            pass


def test_metrics_over_https(server: Server) -> None:
    requests.post(f"{server.url}/validate", json=review(valid()), verify=server.ca_file, timeout=10)
    text = requests.get(f"{server.url}/metrics", verify=server.ca_file, timeout=10).text
    assert 'groupless_webhook_request_duration_seconds_count{allowed="true",endpoint="validate",operation="CREATE"}' \
        in text


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(body=BODIES)
def test_random_bodies_through_gunicorn(server: Server, body: bytes) -> None:
    for path in ("/mutate", "/validate"):
        reply = requests.post(f"{server.url}{path}", data=body, headers={"Content-Type": "application/json"},
                              verify=server.ca_file, timeout=10)
        check_answer(reply.status_code, reply.content, body)


def test_mutual_tls_requires_a_client_certificate_from_the_client_ca(tmp_path: Path) -> None:
    clients = generate(["groupless-test-client"], client_auth=True)
    client_files = clients.write(tmp_path / "client")
    mtls = start(tmp_path / "server", "--client-ca-file", str(client_files["ca.crt"]),
                 client_cert=(str(client_files["tls.crt"]), str(client_files["tls.key"])))
    try:
        ok = requests.get(f"{mtls.url}/healthz", verify=mtls.ca_file, timeout=10,
                          cert=(str(client_files["tls.crt"]), str(client_files["tls.key"])))
        assert ok.text == "ok\n"
        with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
            requests.get(f"{mtls.url}/healthz", verify=mtls.ca_file, timeout=10)
    finally:
        stop(mtls)
    assert mtls.process.returncode == 0  # gunicorn stops cleanly on SIGTERM


def test_renewed_certificates_are_served_without_a_restart(tmp_path: Path) -> None:
    running = start(tmp_path)
    try:
        renewed = generate(["localhost"], ["127.0.0.1"], ca=(running.bundle.ca_cert, running.bundle.ca_key))
        renewed.write(tmp_path)  # what certs.bootstrap.keep_fresh does on a renewal
        with socket.create_connection(("127.0.0.1", int(running.url.rsplit(":", 1)[1])), timeout=5) as raw, \
                ssl.create_default_context(cafile=running.ca_file).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            served = tls.getpeercert(binary_form=True)
        assert served is not None
        assert x509.load_der_x509_certificate(served) == renewed.certificate()
    finally:
        stop(running)


def test_json_log_format_covers_gunicorn_own_lines(tmp_path: Path) -> None:
    running = start(tmp_path, "--log-format", "json", "--log-level", "info")
    try:
        requests.get(f"{running.url}/healthz", verify=running.ca_file, timeout=10)
    finally:
        stop(running)
    lines = running.log.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    messages = {(r["logger"], r["message"].split(":")[0]) for r in records}
    assert ("gunicorn.error", "Listening at") in messages
    assert ("gunicorn.error", "Booting worker with pid") in messages
