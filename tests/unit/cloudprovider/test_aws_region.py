"""The AWS region: --aws-region, else boto3's default chain (AWS_REGION from EKS IRSA), else a start-up error."""

from __future__ import annotations

import pytest

from provisioner.cli import main
from provisioner.cloudprovider.aws.settings import AWSSettings, resolve_region
from provisioner.settings import SettingsError, from_mapping


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path) -> pytest.MonkeyPatch:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "GROUPLESS_AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return monkeypatch


def test_unset_region_comes_from_aws_region_as_eks_irsa_injects_it(no_region: pytest.MonkeyPatch) -> None:
    no_region.setenv("AWS_REGION", "eu-west-3")
    assert AWSSettings.from_controller_settings(from_mapping({"cluster_name": "c"})).region == "eu-west-3"


def test_unset_region_comes_from_aws_default_region(no_region: pytest.MonkeyPatch) -> None:
    no_region.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert AWSSettings.from_controller_settings(from_mapping({"cluster_name": "c"})).region == "us-west-2"


def test_aws_region_wins_over_aws_default_region(no_region: pytest.MonkeyPatch) -> None:
    no_region.setenv("AWS_REGION", "eu-west-3")
    no_region.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert resolve_region(None) == "eu-west-3"


def test_unset_region_comes_from_the_profile(no_region: pytest.MonkeyPatch, tmp_path) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\nregion = sa-east-1\n")
    no_region.setenv("AWS_CONFIG_FILE", str(config))
    assert resolve_region(None) == "sa-east-1"


def test_explicit_flag_wins_over_the_chain(no_region: pytest.MonkeyPatch) -> None:
    no_region.setenv("AWS_REGION", "eu-west-3")
    settings = from_mapping({"cluster_name": "c", "aws_region": "ap-south-1"})
    assert AWSSettings.from_controller_settings(settings).region == "ap-south-1"


def test_no_region_anywhere_is_a_settings_error_naming_the_ways_to_set_one(no_region: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError) as error:
        AWSSettings.from_controller_settings(from_mapping({"cluster_name": "c"}))
    message = str(error.value)
    assert "\n" not in message
    for name in ("--aws-region", "GROUPLESS_AWS_REGION", "AWS_REGION"):
        assert name in message


def test_controller_without_region_exits_2_with_one_line(no_region: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "--cloud-provider", "aws", "--cluster-name", "c"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("groupless controller: no AWS region: set --aws-region (GROUPLESS_AWS_REGION)")
    assert "AWS_REGION" in err
