from __future__ import annotations

import pytest

from provisioner.cli import main


def test_help_lists_every_setting_with_its_environment_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["controller", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, env in [("--kubeconfig", "GROUPLESS_KUBECONFIG"), ("--cluster-name", "GROUPLESS_CLUSTER_NAME"),
                      ("--cluster-endpoint", "GROUPLESS_CLUSTER_ENDPOINT"),
                      ("--cluster-ca-bundle", "GROUPLESS_CLUSTER_CA_BUNDLE"), ("--aws-region", "GROUPLESS_AWS_REGION"),
                      ("--aws-endpoint-url", "GROUPLESS_AWS_ENDPOINT_URL"),
                      ("--default-instance-profile", "GROUPLESS_DEFAULT_INSTANCE_PROFILE"),
                      ("--eni-limited-pod-density", "GROUPLESS_ENI_LIMITED_POD_DENSITY"),
                      ("--batch-idle-duration", "GROUPLESS_BATCH_IDLE_DURATION"),
                      ("--batch-max-duration", "GROUPLESS_BATCH_MAX_DURATION"),
                      ("--registration-timeout", "GROUPLESS_REGISTRATION_TIMEOUT"),
                      ("--nomination-ttl", "GROUPLESS_NOMINATION_TTL"), ("--gc-grace", "GROUPLESS_GC_GRACE"),
                      ("--node-labels", "GROUPLESS_NODE_LABELS"), ("--node-annotations", "GROUPLESS_NODE_ANNOTATIONS"),
                      ("--log-level", "GROUPLESS_LOG_LEVEL"), ("--log-format", "GROUPLESS_LOG_FORMAT"),
                      ("--leader-elect", "GROUPLESS_LEADER_ELECT"), ("--lease-name", "GROUPLESS_LEASE_NAME"),
                      ("--lease-namespace", "GROUPLESS_LEASE_NAMESPACE"),
                      ("--listen-address", "GROUPLESS_LISTEN_ADDRESS")]:
        assert flag in text and env in text, flag
    assert "GROUPLESS_GC_GRACE; default: 300.0" in text


def test_aws_without_cluster_name_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUPLESS_CLUSTER_NAME", raising=False)
    assert main(["controller", "--cloud-provider", "aws"]) == 2
    assert "--cluster-name (GROUPLESS_CLUSTER_NAME) is required" in capsys.readouterr().err


def test_bad_environment_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPLESS_REGISTRATION_TIMEOUT", "a while")
    assert main(["controller", "--cloud-provider", "fake"]) == 2
    assert "GROUPLESS_REGISTRATION_TIMEOUT" in capsys.readouterr().err


def test_missing_kubeconfig_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: pytest.TempPathFactory) -> None:
    assert main(["controller", "--cloud-provider", "fake", "--kubeconfig", f"{tmp_path}/nope"]) == 2
    assert "cannot start" in capsys.readouterr().err
