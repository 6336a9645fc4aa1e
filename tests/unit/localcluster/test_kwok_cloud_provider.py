"""``groupless dev-cluster up --cloud-provider kwok``: the controller gets the kwok provider and no AWS settings."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pytest

from localcluster import build, pki
from localcluster.cluster import ClusterError, LocalCluster, Settings
from provisioner.app.controller import build_cloud_provider
from provisioner.cli import build_parser
from provisioner.clock import FakeClock
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.kube.fake import FakeKubeAPI
from provisioner.settings import from_args


@pytest.fixture(scope="module")
def cluster_pki(tmp_path_factory: pytest.TempPathFactory) -> pki.ClusterPKI:
    return pki.create_cluster_pki(tmp_path_factory.mktemp("pki"))


def _local(tmp_path: Path, cluster_pki: pki.ClusterPKI, cloud_provider: str) -> LocalCluster:
    local = LocalCluster("unit", Settings(cloud_provider=cloud_provider), directory=tmp_path)
    local.pki = cluster_pki
    local.ports = {"apiserver": 6443, "controller-metrics": 18080}
    return local


def test_a_kwok_cluster_runs_the_controller_with_the_kwok_provider_and_no_aws_settings(
    tmp_path: Path, cluster_pki: pki.ClusterPKI
) -> None:
    env = _local(tmp_path, cluster_pki, "kwok").controller_environment()
    assert env["GROUPLESS_CLOUD_PROVIDER"] == "kwok"
    assert sorted(k for k in env if "AWS" in k or k == "GROUPLESS_DEFAULT_INSTANCE_PROFILE") == []
    assert env["GROUPLESS_NODE_ANNOTATIONS"] == "kwok.x-k8s.io/node=fake"
    # what the controller process makes of that environment
    settings = from_args(argparse.Namespace(), env)
    assert settings.cloud_provider == "kwok"
    assert isinstance(build_cloud_provider(settings, FakeClock(), FakeKubeAPI()), KwokCloudProvider)


def test_an_aws_cluster_still_points_the_controller_at_moto(tmp_path: Path, cluster_pki: pki.ClusterPKI) -> None:
    local = _local(tmp_path, cluster_pki, "aws")
    local.ports["moto"] = 15000
    env = local.controller_environment()
    assert env["GROUPLESS_CLOUD_PROVIDER"] == "aws"
    assert env["GROUPLESS_AWS_ENDPOINT_URL"] == "http://127.0.0.1:15000"
    assert env["GROUPLESS_AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "ap-south-1"
    assert Settings().cloud_provider == "aws"


def test_dev_cluster_up_takes_the_cloud_provider() -> None:
    parser = build_parser()
    assert parser.parse_args(["dev-cluster", "up"]).cloud_provider == "aws"
    assert parser.parse_args(["dev-cluster", "up", "--cloud-provider", "kwok"]).cloud_provider == "kwok"


def test_an_unknown_cloud_provider_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))

    def no_build() -> build.Binaries:
        raise AssertionError("nothing may be built for a cloud provider the cluster cannot run")

    monkeypatch.setattr(build, "build", no_build)
    with pytest.raises(ClusterError, match="cloud provider 'gcp': expected one of aws, kwok"):
        LocalCluster("unit", Settings(cloud_provider="gcp"), directory=tmp_path).up()
    args = build_parser().parse_args(["dev-cluster", "up", "--name", "unit", "--cloud-provider", "gcp"])
    sigterm = signal.getsignal(signal.SIGTERM)  # `dev-cluster up` makes SIGTERM a Ctrl-C
    try:
        assert args.func(args) == 1
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert "error: cloud provider 'gcp': expected one of aws, kwok" in capsys.readouterr().err
