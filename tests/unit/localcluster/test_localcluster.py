"""Unit tests of the local cluster's pure parts: PKI, config rewriting, the Go toolchain check."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from localcluster import cluster as cluster_module
from localcluster import pki
from localcluster.cluster import (
    KWOK_CONFIG,
    KWOK_NODE_LEASE_SECONDS,
    KWOK_STAGES,
    NODE_MONITOR_GRACE,
    LocalCluster,
    Settings,
)


@pytest.fixture(scope="module")
def cluster_pki(tmp_path_factory: pytest.TempPathFactory) -> pki.ClusterPKI:
    return pki.create_cluster_pki(tmp_path_factory.mktemp("pki"))


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_serving_certificates_carry_loopback_sans_and_chain_to_the_ca(cluster_pki: pki.ClusterPKI) -> None:
    ca = _cert(cluster_pki.ca.cert)
    for pair in (cluster_pki.apiserver, cluster_pki.groupless):
        cert = _cert(pair.cert)
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
        assert "localhost" in sans.get_values_for_type(x509.DNSName)
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    assert (cluster_pki.ca.key.stat().st_mode & 0o777) == 0o600


def test_admin_client_certificate_is_in_system_masters(cluster_pki: pki.ClusterPKI) -> None:
    cert = _cert(cluster_pki.admin.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    assert ExtendedKeyUsageOID.CLIENT_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


def test_pki_is_reused_not_regenerated(tmp_path: Path) -> None:
    first = pki.create_cluster_pki(tmp_path)
    serial = _cert(first.apiserver.cert).serial_number
    second = pki.create_cluster_pki(tmp_path)
    assert _cert(second.apiserver.cert).serial_number == serial


def test_serving_certificate_without_names_is_refused(cluster_pki: pki.ClusterPKI, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs at least one DNS name or IP address"):
        pki.issue(cluster_pki.ca, tmp_path, "bad", "bad", server=True)


def test_certificate_without_usage_is_refused(cluster_pki: pki.ClusterPKI, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs server or client usage"):
        pki.issue(cluster_pki.ca, tmp_path, "bad", "bad", dns_names=("localhost",))


def _local(tmp_path: Path, cluster_pki: pki.ClusterPKI) -> LocalCluster:
    local = LocalCluster("unit", directory=tmp_path)
    local.pki = cluster_pki
    local.ports = {"apiserver": 6443, "extender": 18443, "webhook": 19443}
    return local


def test_scheduler_config_points_the_extender_at_loopback_with_our_ca(
    tmp_path: Path, cluster_pki: pki.ClusterPKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy = tmp_path / "deploy"
    (deploy / "scheduler").mkdir(parents=True)
    (deploy / "scheduler" / "kube-scheduler-config.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "extenders": [{"urlPrefix": "https://groupless.karpenter.svc:8443/scheduler", "filterVerb": "filter",
                       "prioritizeVerb": "prioritize", "weight": 1, "ignorable": True,
                       "tlsConfig": {"insecure": False}}],
    }))
    monkeypatch.setattr(cluster_module, "DEPLOY_DIR", deploy)
    config = _local(tmp_path, cluster_pki).scheduler_config(with_extender=True)
    [extender] = config["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:18443/scheduler"
    assert extender["filterVerb"] == "filter" and extender["ignorable"] is True
    assert base64.b64decode(extender["tlsConfig"]["caData"]) == cluster_pki.ca.cert.read_bytes()
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"]["kubeconfig"].endswith("admin.kubeconfig")
    assert "extenders" not in _local(tmp_path, cluster_pki).scheduler_config(with_extender=False)


def test_scheduler_tuning_comes_from_the_settings(tmp_path: Path, cluster_pki: pki.ClusterPKI) -> None:
    local = _local(tmp_path, cluster_pki)
    assert local.scheduler_config(with_extender=True)["percentageOfNodesToScore"] == 100  # deploy/scheduler's
    assert local.scheduler_flags() == []
    tuned = LocalCluster("unit", Settings(scheduler_feature_gates={"SchedulerAsyncAPICalls": True, "B": False},
                                          percentage_of_nodes_to_score=100), directory=tmp_path)
    tuned.pki = cluster_pki
    tuned.ports = dict(local.ports)
    assert tuned.scheduler_config(with_extender=True)["percentageOfNodesToScore"] == 100
    assert tuned.scheduler_flags() == ["--feature-gates=B=false,SchedulerAsyncAPICalls=true"]
    adaptive = LocalCluster("unit", Settings(percentage_of_nodes_to_score=0), directory=tmp_path)
    adaptive.pki = cluster_pki
    adaptive.ports = dict(local.ports)
    assert adaptive.scheduler_config(with_extender=True)["percentageOfNodesToScore"] == 0


def test_webhook_configurations_get_loopback_urls_and_our_ca_bundle(
    tmp_path: Path, cluster_pki: pki.ClusterPKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy = tmp_path / "deploy"
    (deploy / "webhooks").mkdir(parents=True)
    docs = [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "m"}, "webhooks": [{"name": "m.groupless.dev", "clientConfig": {
             "service": {"name": "groupless", "namespace": "karpenter", "path": "/mutate"}}}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "v"}, "webhooks": [{"name": "v.groupless.dev", "clientConfig": {
             "url": "https://example.invalid:9443/validate"}}]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ignored"}},
    ]
    (deploy / "webhooks" / "webhooks.yaml").write_text(yaml.safe_dump_all(docs))
    monkeypatch.setattr(cluster_module, "DEPLOY_DIR", deploy)
    out = _local(tmp_path, cluster_pki).webhook_configurations()
    assert [d["kind"] for d in out] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    urls = [d["webhooks"][0]["clientConfig"]["url"] for d in out]
    assert urls == ["https://127.0.0.1:19443/mutate", "https://127.0.0.1:19443/validate"]
    assert all("service" not in d["webhooks"][0]["clientConfig"] for d in out)
    assert base64.b64decode(out[0]["webhooks"][0]["clientConfig"]["caBundle"]) == cluster_pki.ca.cert.read_bytes()


def test_kwok_options_are_shipped_and_keep_leases_within_the_grace_period() -> None:
    (config,) = [d for d in yaml.safe_load_all(KWOK_CONFIG.read_text()) if d]
    assert config["kind"] == "KwokConfiguration"
    assert config["options"]["nodeLeaseParallelism"] >= 16 and config["options"]["nodePlayStageParallelism"] >= 16
    # kwok renews a lease every quarter of its duration: several renewals fit in the grace period
    renewal = KWOK_NODE_LEASE_SECONDS / 4
    assert int(NODE_MONITOR_GRACE.removesuffix("s")) >= 4 * renewal


def test_kwok_stages_are_shipped() -> None:
    stages = [d for d in yaml.safe_load_all(KWOK_STAGES.read_text()) if d]
    assert sorted(s["metadata"]["name"] for s in stages) == [
        "node-heartbeat-with-lease", "node-initialize", "pod-complete", "pod-delete", "pod-ready",
    ]
    assert all(s["kind"] == "Stage" for s in stages)


def test_missing_go_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localcluster import build

    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))  # no binaries there: a build is needed
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "FALLBACK_GO", tmp_path / "no-go")
    with pytest.raises(build.BuildError, match=r"Go toolchain \(go 1.26 or later\).*install it"):
        build.build()
