"""The extender through its real HTTPS server (gunicorn gthread, TLS from certs.bundle), both modes, bad input."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from extender import handlers
from tests.component.extender.serve_fixture import Server, running, write_certs
from tests.fixtures.extender import body, now, raw_body, state
from tests.fixtures.extender.build_fixtures import N1, N2, N3, N6, N7, UNKNOWN

LATE_UID = "5a1f0c2e-8d3b-4c77-9e10-000000000004"


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def trigger_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trigger") / "uids"


@pytest.fixture(scope="module")
def server(cert_dir: Path, trigger_log: Path) -> Iterator[Server]:
    with running(cert_dir, "--max-body-bytes", "32768", "--trigger-log", str(trigger_log)) as srv:
        yield srv


@pytest.fixture
def session(server: Server) -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would override verify
        s.verify = server.ca_file
        yield s


def post(session: requests.Session, server: Server, verb: str, data: bytes) -> requests.Response:
    return session.post(f"{server.url}/{verb}", data=data, headers={"Content-Type": "application/json"}, timeout=10)


def test_filter_node_names_mode_over_https(server: Server, session: requests.Session) -> None:
    response = post(session, server, "filter", raw_body("filter-nodenames"))
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    answer = response.json()
    assert answer == handlers.filter(body("filter-nodenames"), state(), now())
    assert answer["NodeNames"] == [N1, N6, N7, UNKNOWN]
    assert answer["FailedNodes"] == {N2: "node is reserved for nominated pods"}


def test_filter_nodes_mode_over_https(server: Server, session: requests.Session) -> None:
    # filter-nodes.json is ~41 KiB, over this server's 32 KiB cap: send the same request trimmed to 3 nodes
    request = body("filter-nodes")
    request["Nodes"]["items"] = [i for i in request["Nodes"]["items"] if i["metadata"]["name"] in (N1, N2, N3)]
    data = json.dumps(request).encode()
    assert len(data) < 32768
    answer = post(session, server, "filter", data).json()
    assert [i["metadata"]["name"] for i in answer["Nodes"]["items"]] == [N1]
    assert answer["NodeNames"] is None
    assert answer["FailedNodes"] == {N2: "node is reserved for nominated pods"}
    assert answer["FailedAndUnresolvableNodes"] == {N3: "node is being disrupted"}


def test_lowercase_request_is_answered_in_go_casing(server: Server, session: requests.Session) -> None:
    answer = post(session, server, "filter", raw_body("filter-lowercase")).json()
    assert answer["NodeNames"] == [N1, N6, N7, UNKNOWN]


def test_no_node_left_signals_the_provisioner(server: Server, session: requests.Session, trigger_log: Path) -> None:
    answer = post(session, server, "filter", raw_body("filter-none-left")).json()
    assert answer["NodeNames"] == []
    assert answer["FailedNodes"][N2].endswith("(groupless is provisioning a node for this pod)")
    assert trigger_log.read_text().splitlines()[-1] == LATE_UID


def test_prioritize_over_https(server: Server, session: requests.Session) -> None:
    response = post(session, server, "prioritize", raw_body("prioritize-nominated"))
    assert response.status_code == 200
    assert response.json() == handlers.prioritize(body("prioritize-nominated"), state(), now())
    assert {"Host": N2, "Score": 10} in response.json()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "bad request: request body is not JSON: unexpected character, expected a string key"),
        (b"", "bad request: request body is empty: expected ExtenderArgs JSON"),
        (b'{"Nodes": null, "NodeNames": []}', "bad request: missing Pod"),
        (b'{"Pod": {}}', "bad request: neither Nodes nor NodeNames given"),
        (b'{"Pod": {}, "NodeNames": [3]}', "bad request: NodeNames must be a list of strings"),
        (b"[" * 20_000, "bad request: request body is not JSON: depth limit exceeded"),
        (b'{"Pod": {}, "NodeNames": [], "x": NaN}', "bad request: request body is not JSON: unexpected character"),
        ("\udcff".encode("utf-8", "surrogatepass"), "bad request: request body is not JSON: str is not valid UTF-8"),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_bad_input_gets_400_with_one_line(server: Server, session: requests.Session, verb: str, data: bytes,
                                          reason: str) -> None:
    response = post(session, server, verb, data)
    assert response.status_code == 400
    assert response.text.startswith(reason)
    assert response.text.count("\n") == 1


def test_body_over_the_cap_gets_413(server: Server, session: requests.Session) -> None:
    data = raw_body("filter-nodes")  # 41 KiB > 32 KiB
    response = post(session, server, "filter", data)
    assert response.status_code == 413
    assert response.text == f"too large: request body of {len(data)} bytes exceeds the limit of 32768 bytes\n"


def test_chunked_body_over_the_cap_gets_413(server: Server, session: requests.Session) -> None:
    data = raw_body("filter-nodes")
    response = session.post(f"{server.url}/filter", data=iter([data[:20000], data[20000:]]),
                            headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 413


def test_healthz_and_metrics(server: Server, session: requests.Session) -> None:
    assert session.get(f"{server.url}/healthz", timeout=10).text == "ok\n"
    post(session, server, "filter", raw_body("filter-nodenames"))
    metrics = session.get(f"{server.url}/metrics", timeout=10).text
    assert 'groupless_extender_request_duration_seconds_count{code="200",verb="filter"}' in metrics
    assert 'groupless_extender_request_duration_seconds_count{code="400",verb="filter"}' in metrics


def test_plain_http_is_refused(server: Server) -> None:
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(server.url.replace("https", "http") + "/filter", data=b"{}", timeout=5)


def _client_pair(cert_dir: Path, out: Path) -> tuple[str, str]:
    """A client certificate signed by the test CA (clientAuth), as kube-scheduler's tlsConfig.certFile would be."""
    ca_cert = x509.load_pem_x509_certificate((cert_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((cert_dir / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "system:kube-scheduler")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (out / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "client.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return str(out / "client.crt"), str(out / "client.key")


def test_mutual_tls_needs_a_client_certificate(cert_dir: Path, tmp_path: Path) -> None:
    client = _client_pair(cert_dir, tmp_path)
    with running(cert_dir, "--client-ca", str(cert_dir / "ca.crt")) as srv:
        with requests.Session() as anonymous, pytest.raises(
                (requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
            anonymous.trust_env = False
            anonymous.post(f"{srv.url}/filter", data=raw_body("filter-nodenames"), verify=srv.ca_file, timeout=10)
        with requests.Session() as scheduler:
            scheduler.trust_env = False
            response = scheduler.post(f"{srv.url}/filter", data=raw_body("filter-nodenames"), verify=srv.ca_file,
                                      cert=client, timeout=10)
        assert response.status_code == 200
        assert response.json()["NodeNames"] == [N1, N6, N7, UNKNOWN]


def test_cli_without_cluster_access_serves_an_empty_state(cert_dir: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(KUBECONFIG=str(tmp_path / "absent"), HOME=str(tmp_path))
    log = tmp_path / "stderr"
    with running(cert_dir, "--max-body-bytes", "1000000", cli=True, env=env, stderr=log) as srv:
        with requests.Session() as s:
            s.trust_env = False
            s.verify = srv.ca_file
            assert s.get(f"{srv.url}/healthz", timeout=10).status_code == 200
            answer = s.post(f"{srv.url}/filter", data=raw_body("filter-nodenames"), timeout=10).json()
            assert answer["NodeNames"] == body("filter-nodenames")["NodeNames"]  # every node unmanaged: all pass
            assert s.post(f"{srv.url}/filter", data=b"x" * 1_000_001, timeout=10).status_code == 413
    assert "No cluster access" in log.read_text()
    missing = subprocess.run([sys.executable, "-m", "provisioner.cli", "extender", "--listen", "127.0.0.1:1"],
                             capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode == 2
    assert "--tls-cert-file and --tls-key-file are required" in missing.stderr
