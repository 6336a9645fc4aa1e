"""Node bootstrap settings: the cluster CA discovered as Karpenter does, and the Service CIDR reaching nodeadm."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from provisioner.cloudprovider.aws.settings import AWSSettings, discover_cluster_ca
from provisioner.cloudprovider.aws.userdata import make_bootstrap, user_data
from provisioner.settings import SettingsError, from_mapping

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
PEM_B64 = base64.b64encode(PEM).decode()


def write_kubeconfig(path: Path, cluster: dict[str, str], current: str = "ctx") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "other", "cluster": {"server": "https://other", "certificate-authority-data": "T1RIRVI="}},
                     {"name": "mine", "cluster": {"server": "https://mine", **cluster}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "mine", "user": "u"}},
                     {"name": "ctx-other", "context": {"cluster": "other", "user": "u"}}],
        "users": [{"name": "u", "user": {}}],
    }))
    return path


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    return tmp_path


def test_explicit_bundle_wins(isolated: Path) -> None:
    (isolated / "ca.crt").write_bytes(PEM)
    assert discover_cluster_ca("RVhQTElDSVQ=", None, str(isolated / "ca.crt")) == "RVhQTElDSVQ="


def test_in_cluster_service_account_ca_is_base64_encoded(isolated: Path) -> None:
    (isolated / "ca.crt").write_bytes(PEM)
    assert discover_cluster_ca("", None, str(isolated / "ca.crt")) == PEM_B64


def test_kubeconfig_current_context_certificate_authority_data(isolated: Path) -> None:
    kubeconfig = write_kubeconfig(isolated / "kc", {"certificate-authority-data": "TUlORQ=="})
    assert discover_cluster_ca("", str(kubeconfig), str(isolated / "no-ca.crt")) == "TUlORQ=="
    other = write_kubeconfig(isolated / "kc2", {"certificate-authority-data": "TUlORQ=="}, current="ctx-other")
    assert discover_cluster_ca("", str(other), str(isolated / "no-ca.crt")) == "T1RIRVI="


def test_kubeconfig_certificate_authority_file_relative_to_the_kubeconfig(isolated: Path) -> None:
    (isolated / "pki").mkdir()
    (isolated / "pki" / "ca.pem").write_bytes(PEM)
    kubeconfig = write_kubeconfig(isolated / "kc", {"certificate-authority": "pki/ca.pem"})
    assert discover_cluster_ca("", str(kubeconfig), str(isolated / "no-ca.crt")) == PEM_B64


def test_explicit_kubeconfig_is_preferred_to_the_service_account_like_the_client(isolated: Path) -> None:
    (isolated / "ca.crt").write_bytes(PEM)
    kubeconfig = write_kubeconfig(isolated / "kc", {"certificate-authority-data": "TUlORQ=="})
    assert discover_cluster_ca("", str(kubeconfig), str(isolated / "ca.crt")) == "TUlORQ=="


def test_no_source_gives_empty_without_raising(isolated: Path) -> None:
    (isolated / "broken").write_text(": not yaml [")
    assert discover_cluster_ca("", None, str(isolated / "no-ca.crt")) == ""
    assert discover_cluster_ca("", str(isolated / "broken"), str(isolated / "no-ca.crt")) == ""
    assert discover_cluster_ca("", str(write_kubeconfig(isolated / "kc", {})), str(isolated / "no-ca.crt")) == ""


def test_kubeconfig_environment_fallback_reaches_the_settings(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = write_kubeconfig(isolated / "kc", {"certificate-authority-data": "TUlORQ=="})
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings = from_mapping({"cluster_name": "c"}, environ={"KUBECONFIG": str(kubeconfig)})
    assert AWSSettings.from_controller_settings(settings).cluster_ca_bundle == "TUlORQ=="


def test_service_cidr_setting_defaults_and_reaches_aws_settings(isolated: Path) -> None:
    assert AWSSettings.from_controller_settings(from_mapping({"cluster_name": "c"})).service_cidr == "10.100.0.0/16"
    settings = from_mapping({"cluster_name": "c"}, environ={"GROUPLESS_SERVICE_CIDR": "172.20.0.0/16"})
    assert AWSSettings.from_controller_settings(settings).service_cidr == "172.20.0.0/16"
    assert from_mapping({"service_cidr": "fd00:10:96::/112"}).aws.service_cidr == "fd00:10:96::/112"


@pytest.mark.parametrize("bad", ["172.20.0.1/16", "10.100.0.0", "ten"])
def test_bad_service_cidr_names_the_flag_and_variable(bad: str) -> None:
    with pytest.raises(SettingsError) as error:
        from_mapping({"service_cidr": bad})
    assert "--service-cidr / GROUPLESS_SERVICE_CIDR" in str(error.value) and repr(bad) in str(error.value)


def test_al2023_user_data_carries_the_discovered_ca_and_the_service_cidr(isolated: Path) -> None:
    (isolated / "ca.crt").write_bytes(PEM)
    aws = AWSSettings(cluster_name="c", cluster_endpoint="https://api",
                      cluster_ca_bundle=discover_cluster_ca("", None, str(isolated / "ca.crt")),
                      service_cidr="172.20.0.0/16")
    text = user_data("AL2023", make_bootstrap(aws.cluster_name, aws.cluster_endpoint, aws.cluster_ca_bundle,
                                              aws.service_cidr, {}, []))
    document = yaml.safe_load(text.split("---\n", 1)[1].split("\n--//--")[0])
    assert document["spec"]["cluster"] == {"name": "c", "apiServerEndpoint": "https://api",
                                           "certificateAuthority": PEM_B64, "cidr": "172.20.0.0/16"}
    assert "clusterDNS" not in document["spec"].get("kubelet", {}).get("config", {})  # nodeadm derives it
