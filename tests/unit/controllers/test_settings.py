from __future__ import annotations

import argparse
import dataclasses

import pytest

from provisioner import settings as settings_module
from provisioner.settings import ControllerSettings, SettingsError, add_arguments, from_args, from_mapping


def parse(argv: list[str], env: dict[str, str]) -> ControllerSettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, env)
    return from_args(parser.parse_args(argv), env)


def test_defaults() -> None:
    settings = parse([], {})
    assert settings == ControllerSettings()
    assert settings.nodes.registration_timeout_seconds == 900.0 and settings.gc_grace_seconds == 300.0
    assert settings.aws.eni_limited_pod_density is True and settings.leader_election.enabled is True


def test_environment_then_flag_precedence_and_units() -> None:
    env = {"GROUPLESS_CLUSTER_NAME": "from-env", "GROUPLESS_GC_GRACE": "5m", "GROUPLESS_REGISTRATION_TIMEOUT": "15m",
           "GROUPLESS_BATCH_IDLE_DURATION": "500ms", "GROUPLESS_ENI_LIMITED_POD_DENSITY": "false",
           "GROUPLESS_NODE_ANNOTATIONS": "kwok.x-k8s.io/node=fake", "GROUPLESS_AWS_ENDPOINT_URL": ""}
    settings = parse(["--cluster-name", "from-flag", "--node-labels", "team=a, tier=b"], env)
    assert settings.aws.cluster_name == "from-flag"
    assert settings.gc_grace_seconds == 300.0 and settings.nodes.registration_timeout_seconds == 900.0
    assert settings.batching.idle_seconds == 0.5
    assert settings.aws.eni_limited_pod_density is False
    assert dict(settings.nodes.annotations) == {"kwok.x-k8s.io/node": "fake"}
    assert dict(settings.nodes.labels) == {"team": "a", "tier": "b"}
    assert settings.aws.endpoint_url is None


def test_kube_client_rate_limit_is_karpenters_by_default_and_settable() -> None:
    assert (ControllerSettings().kube_client_qps, ControllerSettings().kube_client_burst) == (200.0, 300)
    settings = parse(["--kube-client-burst", "50"], {"GROUPLESS_KUBE_CLIENT_QPS": "25"})
    assert (settings.kube_client_qps, settings.kube_client_burst) == (25.0, 50)


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
    ({"node_labels": "team=a,kubernetes.io/arch=arm64"},
     "kubernetes.io/arch: set by the instance or the Provisioner on every node, not a setting"),
    ({"lease_duration": "5", "renew_deadline": "10"}, "--lease-duration (5.0) > --renew-deadline"),
    ({"batch_idle_duration": "20s"}, "--batch-idle-duration"),
    ({"kube_client_qps": "0"}, "--kube-client-qps"),
    ({"kube_client_burst": "1.5"}, "--kube-client-burst"),
])
def test_bad_values_name_the_setting(values: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError) as error:
        from_mapping(values)
    assert needle in str(error.value)


def test_bad_environment_variable_is_named() -> None:
    with pytest.raises(SettingsError, match="GROUPLESS_GC_GRACE"):
        parse([], {"GROUPLESS_GC_GRACE": "-3"})


def leaf_fields(cls: type, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Attribute paths of every non-group field of a settings dataclass."""
    found: set[tuple[str, ...]] = set()
    for f in dataclasses.fields(cls):
        value = getattr(cls(), f.name)
        if dataclasses.is_dataclass(value):
            found |= leaf_fields(type(value), (*prefix, f.name))
        else:
            found.add((*prefix, f.name))
    return found


def test_every_setting_is_one_flag_and_every_flag_one_setting() -> None:
    paths = [option.path for option in settings_module._OPTIONS]
    assert len(paths) == len(set(paths))
    # every field the process reads has exactly one flag; the batch size stays Karpenter's 2,000
    assert set(paths) == leaf_fields(ControllerSettings) - {("batching", "max_pods")}
    durations = [o.path for o in settings_module._OPTIONS if o.parse is settings_module._parse_duration]
    assert durations and all(path[-1].endswith("_seconds") for path in durations)


def test_the_provisioning_group_is_the_process_settings() -> None:
    settings = from_mapping({"batch_idle_duration": "2", "batch_max_duration": "20", "resync_period": "45",
                             "node_labels": "team=a", "nomination_ttl": "60"})
    provisioning = settings.provisioning
    assert provisioning.batching is settings.batching and provisioning.nodes is settings.nodes
    assert (provisioning.batching.idle_seconds, provisioning.batching.max_seconds) == (2.0, 20.0)
    assert provisioning.resync_seconds == 45.0 and provisioning.nodes.nomination_ttl_seconds == 60.0
    assert dict(provisioning.nodes.labels) == {"team": "a"}
