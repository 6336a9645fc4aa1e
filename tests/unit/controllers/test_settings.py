from __future__ import annotations

import argparse

import pytest

from provisioner.settings import ControllerSettings, SettingsError, add_arguments, from_args, from_mapping


def parse(argv: list[str], env: dict[str, str]) -> ControllerSettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, env)
    return from_args(parser.parse_args(argv), env)


def test_defaults() -> None:
    settings = parse([], {})
    assert settings == ControllerSettings()
    assert settings.registration_timeout == 900.0 and settings.gc_grace == 300.0
    assert settings.eni_limited_pod_density is True and settings.leader_elect is True


def test_environment_then_flag_precedence_and_units() -> None:
    env = {"GROUPLESS_CLUSTER_NAME": "from-env", "GROUPLESS_GC_GRACE": "5m", "GROUPLESS_REGISTRATION_TIMEOUT": "15m",
           "GROUPLESS_BATCH_IDLE_DURATION": "500ms", "GROUPLESS_ENI_LIMITED_POD_DENSITY": "false",
           "GROUPLESS_NODE_ANNOTATIONS": "kwok.x-k8s.io/node=fake", "GROUPLESS_AWS_ENDPOINT_URL": ""}
    settings = parse(["--cluster-name", "from-flag", "--node-labels", "team=a, tier=b"], env)
    assert settings.cluster_name == "from-flag"
    assert settings.gc_grace == 300.0 and settings.registration_timeout == 900.0
    assert settings.batch_idle_duration == 0.5
    assert settings.eni_limited_pod_density is False
    assert dict(settings.node_annotations) == {"kwok.x-k8s.io/node": "fake"}
    assert dict(settings.node_labels) == {"team": "a", "tier": "b"}
    assert settings.aws_endpoint_url is None


def test_help_shows_defaults_and_environment() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, {"GROUPLESS_LEASE_NAME": "mine"})
    text = " ".join(parser.format_help().split())
    assert "GROUPLESS_REGISTRATION_TIMEOUT; default: 900.0" in text
    assert "GROUPLESS_LEASE_NAME; default: mine" in text


@pytest.mark.parametrize(("values", "needle"), [
    ({"gc_grace": "soon"}, "--gc-grace"),
    ({"leader_elect": "maybe"}, "expected true or false"),
    ({"log_format": "xml"}, "expected one of text, json"),
    ({"node_labels": "novalue"}, "expected key=value"),
    ({"lease_duration": "5", "renew_deadline": "10"}, "--lease-duration (5.0) > --renew-deadline"),
    ({"batch_idle_duration": "20s"}, "--batch-idle-duration"),
])
def test_bad_values_name_the_setting(values: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError) as error:
        from_mapping(values)
    assert needle in str(error.value)


def test_bad_environment_variable_is_named() -> None:
    with pytest.raises(SettingsError, match="GROUPLESS_GC_GRACE"):
        parse([], {"GROUPLESS_GC_GRACE": "-3"})
