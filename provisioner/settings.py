"""Settings of ``groupless controller``: every one a flag and a ``GROUPLESS_*`` environment variable.

A Deployment sets environment variables, a developer types flags; both work, the flag wins, and
``--help`` shows the default (or the value the environment supplies). The flags mirror
Karpenter v0.6.3's (``CLUSTER_NAME``, ``CLUSTER_ENDPOINT``, ``AWS_ENI_LIMITED_POD_DENSITY``,
``AWS_DEFAULT_INSTANCE_PROFILE``) plus the lifecycle timings this project makes settable.

In code the settings are frozen groups (:class:`Batching`, :class:`NodeDefaults`,
:class:`LeaderElection`, :class:`AWS`, :class:`Serving`, :class:`Logging`) inside
:class:`ControllerSettings`, one name per knob, durations in seconds with ``_seconds`` in the
name; the provisioning controller takes :attr:`ControllerSettings.provisioning`. Flags and
variables keep the documented names (``--batch-idle-duration`` sets ``batching.idle_seconds``;
the table is :data:`_OPTIONS`). Bad values fail at start-up with a message naming the flag and
the environment variable.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.logging import FORMATS, LEVEL_NAMES, format_name, level_name
from provisioner.model import labels as wk

ENV_PREFIX = "GROUPLESS_"


#: Seconds between full re-reconciles of every object, and between unprompted looks at pending pods.
DEFAULT_RESYNC_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Batching:
    """The batching window (Karpenter's batcher; seconds, pods).

    It closes ``idle_seconds`` after the last new pending pod, ``max_seconds`` after it opened,
    or at ``max_pods`` pods, whichever comes first.
    """

    idle_seconds: float = 1.0
    max_seconds: float = 10.0
    max_pods: int = 2000
    #: Seconds after its creation that a pod kube-scheduler has not tried yet (no
    #: ``PodScheduled`` condition) is provisioned for anyway: kube-scheduler is backlogged
    #: (:func:`provisioner.model.pods.waits_for_first_attempt`). kube-scheduler tries a new pod
    #: within milliseconds unless it is backlogged, so this acts only on large bursts, where its
    #: first pass (each failed attempt waits for a status PATCH) is the pace: 5,000 pods ran in
    #: 391 s with 5 s against 783 s with 0 on the local cluster. 0: Karpenter's rule, only pods
    #: it marked Unschedulable.
    untried_grace_seconds: float = 5.0

    @property
    def untried_grace(self) -> float | None:
        """:attr:`untried_grace_seconds`, None when 0 (off)."""
        return self.untried_grace_seconds if self.untried_grace_seconds > 0 else None

    @property
    def nomination_window_seconds(self) -> float:
        """Seconds an existing node counts as nominated after a round placed pending pods on it.

        Karpenter's ``nominationWindow``: twice the batch's maximum duration, at least 10 s. The
        emptiness controller leaves such a node alone meanwhile (Karpenter's ``IsNominated``):
        its pods are on their way from kube-scheduler's queue, and the next rounds place them
        there again while they wait.
        """
        return max(2 * self.max_seconds, 10.0)


@dataclass(frozen=True, slots=True)
class NodeDefaults:
    """What every launched node gets, and how long it has.

    ``labels`` / ``annotations`` go on every Node created (the local cluster hands nodes to kwok
    with an annotation). ``registration_timeout_seconds``: a node not Ready this long after
    creation is terminated. ``nomination_ttl_seconds``: a Ready node's nominations expire this
    long later; a new node's nomination deadline is launch + both (the initialization
    controller moves it once the node is Ready).
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    registration_timeout_seconds: float = 900.0
    nomination_ttl_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class ProvisioningSettings:
    """What the provisioning controller needs (seconds; counts).

    ``batching`` and ``nodes``: the groups of the same name in :class:`ControllerSettings`.
    ``resync_seconds``: how often the loop looks at pending pods without a signal.
    ``backoff_base_seconds`` / ``backoff_max_seconds``: per-Provisioner exponential back-off
    after launch errors. ``ice_retries``: rounds of re-solving after insufficient capacity.
    ``launch_parallelism``: concurrent launches.
    """

    batching: Batching = field(default_factory=Batching)
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    backoff_base_seconds: float = 5.0
    backoff_max_seconds: float = 300.0
    ice_retries: int = 3
    launch_parallelism: int = 16


@dataclass(frozen=True, slots=True)
class AWS:
    """The AWS cloud provider: the cluster its nodes join, and where and how it launches them.

    ``cluster_name`` tags instances (``kubernetes.io/cluster/<name>``) and goes into user data
    with ``cluster_endpoint``, ``cluster_ca_bundle`` (base64; empty: discovered) and
    ``service_cidr`` (AL2023 nodeadm). ``region`` ``None``: the SDK's default chain;
    ``endpoint_url`` / ``pricing_endpoint_url``: EC2/SSM and Pricing API overrides.
    """

    cluster_name: str = ""
    cluster_endpoint: str = ""
    cluster_ca_bundle: str = ""
    service_cidr: str = "10.100.0.0/16"
    region: str | None = None
    endpoint_url: str | None = None
    pricing_endpoint_url: str | None = None
    default_instance_profile: str | None = None
    eni_limited_pod_density: bool = True


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """client-go's leader election over a ``coordination.k8s.io/v1`` Lease (seconds)."""

    enabled: bool = True
    lease_name: str = "groupless-controller"
    lease_namespace: str = "kube-system"
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0


@dataclass(frozen=True, slots=True)
class Serving:
    """``host:port`` addresses: probes and metrics, and the optional in-process extender (empty: off)."""

    listen_address: str = "0.0.0.0:8080"
    extender_address: str = ""


@dataclass(frozen=True, slots=True)
class Kwok:
    """The kwok cloud provider's catalog files (paths; unset: the default catalog shipped as package data)."""

    instance_types_file: str | None = None
    offerings_file: str | None = None


@dataclass(frozen=True, slots=True)
class Logging:
    """Log level (``debug`` ... ``error``) and format (``text`` or ``json``)."""

    level: str = "info"
    format: str = "text"


@dataclass(frozen=True, slots=True)
class Consolidation:
    """Consolidation's pace and churn guards (seconds, fractions, counts); docs/consolidation.md.

    ``interval_seconds``: between passes (Karpenter: 10 s). ``settle_seconds``: a node is a
    candidate only once no pod has been bound to it or removed from it for this long (v1's
    ``consolidateAfter``). ``validation_seconds``: a move decided is checked again this long
    later, just before it acts, and dropped if the cluster changed (Karpenter: 15 s).
    ``min_savings_fraction``: a move must save at least this share of its nodes' price.
    ``max_disrupted_share``: at most this share of the consolidating Provisioners' nodes (at
    least one) disrupted at once. ``spot_options``: a spot node is replaced by spot only when
    at least this many cheaper instance types remain (Karpenter's 15); else spot is only deleted.
    """

    interval_seconds: float = 10.0
    settle_seconds: float = 30.0
    validation_seconds: float = 15.0
    min_savings_fraction: float = 0.1
    max_disrupted_share: float = 0.1
    spot_options: int = 15


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Everything the controller process needs, in groups; defaults are the documented ones.

    ``gc_grace_seconds``: an instance with no Node this long is terminated. ``resync_seconds``:
    the period of the lifecycle controllers' full resync and of the provisioning loop's
    unprompted look at pending pods.
    """

    kubeconfig: str | None = None
    #: The Kubernetes client's rate limit (client-go's QPS and Burst; Karpenter's
    #: ``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST`` defaults): requests a second, and how many may
    #: go at once after a quiet spell. A burst of 1,000 pods means ~1,000 Node creations,
    #: nominations and lifecycle patches within a minute.
    kube_client_qps: float = 200.0
    kube_client_burst: int = 300
    cloud_provider: str = "aws"
    aws: AWS = field(default_factory=AWS)
    batching: Batching = field(default_factory=Batching)
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    gc_grace_seconds: float = 300.0
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    serving: Serving = field(default_factory=Serving)
    logging: Logging = field(default_factory=Logging)
    kwok: Kwok = field(default_factory=Kwok)
    consolidation: Consolidation = field(default_factory=Consolidation)

    @property
    def provisioning(self) -> ProvisioningSettings:
        """The provisioning controller's settings: this process's batching, node defaults and resync."""
        return ProvisioningSettings(batching=self.batching, nodes=self.nodes, resync_seconds=self.resync_seconds)


class SettingsError(ValueError):
    """A setting has a value it cannot take; the message names the flag and the variable."""


def parse_bool(text: str) -> bool:
    """``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off`` (any case); ValueError otherwise."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_duration(text: str) -> float:
    """Seconds: ``90``, ``1.5``, or with a unit ``500ms``, ``30s``, ``15m``, ``1h``; ValueError otherwise."""
    value = text.strip()
    for unit, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if value.endswith(unit) and value[: -len(unit)].replace(".", "", 1).isdigit():
            return float(value[: -len(unit)]) * factor
    seconds = float(value)
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"expected a non-negative duration, got {text!r}")
    return seconds


def _parse_map(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}``; empty string -> ``{}``."""
    result: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def _parse_node_labels(text: str) -> dict[str, str]:
    """:func:`_parse_map`, refusing the labels the instance or the controller decides on every node.

    Zone, instance type, architecture, operating system, capacity type, the provider's
    ``karpenter.k8s.aws/instance-*`` labels, ``kubernetes.io/hostname`` and
    ``karpenter.sh/provisioner-name`` (``provisioner.model.labels.WELL_KNOWN_REQUIREMENT_LABELS``)
    come from the instance and the Provisioner: a setting would be overridden on some nodes and
    not others.
    """
    labels = _parse_map(text)
    decided = sorted(k for k in labels if wk.normalize_label_key(k) in wk.WELL_KNOWN_REQUIREMENT_LABELS)
    if decided:
        raise ValueError(f"{', '.join(decided)}: set by the instance or the Provisioner on every node, not a setting")
    return labels


def _fraction(text: str) -> float:
    """A share between 0 and 1 (``0.1``, or ``10%``); ValueError otherwise."""
    value = text.strip()
    number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    if not 0 <= number <= 1:
        raise ValueError(f"expected a fraction between 0 and 1 (or a percentage), got {text!r}")
    return number


def _count(text: str) -> int:
    """A whole number >= 1; ValueError otherwise."""
    number = int(text.strip())
    if number < 1:
        raise ValueError(f"expected a whole number of at least 1, got {text!r}")
    return number


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return text

    return parse


def _positive(parse: Callable[[str], float]) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        value = parse(text.strip())
        if not value > 0:
            raise ValueError(f"expected a positive number, got {text!r}")
        return value

    return check


def _optional(text: str) -> str | None:
    return text or None


def _cidr(text: str) -> str:
    """An IPv4 or IPv6 network in CIDR form (``172.20.0.0/16``), normalised; ValueError otherwise."""
    try:
        if "/" not in text:
            raise ValueError("no prefix length")
        return str(ipaddress.ip_network(text.strip(), strict=True))
    except ValueError as error:
        raise ValueError(f"expected a network in CIDR form like 172.20.0.0/16, got {text!r} ({error})") from error


@dataclass(frozen=True, slots=True)
class _Option:
    """One setting as users know it: ``name`` gives the flag and the variable, ``path`` the field.

    ``path`` is the attribute path in :class:`ControllerSettings` (``("batching", "idle_seconds")``
    for ``--batch-idle-duration``); the flag and variable names are the documented ones and
    stay as they are when a field is renamed.
    """

    name: str
    path: tuple[str, ...]
    parse: Callable[[str], Any]
    help: str


_OPTIONS: tuple[_Option, ...] = (
    _Option("kubeconfig", ("kubeconfig",), _optional,
            "kubeconfig file; unset: $KUBECONFIG, then in-cluster config"),
    _Option("kube_client_qps", ("kube_client_qps",), _positive(float),
            "Kubernetes API requests a second this process may make (watches excepted)"),
    _Option("kube_client_burst", ("kube_client_burst",), _positive(int),
            "Kubernetes API requests this process may make at once above --kube-client-qps"),
    _Option("cluster_name", ("aws", "cluster_name"), str,
            "cluster name: instance tags kubernetes.io/cluster/<name> and user data"),
    _Option("cluster_endpoint", ("aws", "cluster_endpoint"), str, "API server URL written into node user data"),
    _Option("cluster_ca_bundle", ("aws", "cluster_ca_bundle"), str,
            "base64 CA bundle of the API server, for node user data (unset: the in-cluster service "
            "account's ca.crt, else the kubeconfig's certificate-authority-data; none: launches fail)"),
    _Option("service_cidr", ("aws", "service_cidr"), _cidr,
            "the cluster's Service CIDR, for AL2023 nodeadm (which derives the cluster DNS IP from it); "
            "EKS picks 10.100.0.0/16, or 172.20.0.0/16 when the VPC is in 10.0.0.0/8: set it then"),
    _Option("cloud_provider", ("cloud_provider",), _choice("aws", "fake", "kwok"),
            "cloud provider: aws (boto3), kwok (instances are Nodes kwok runs; docs/kwok.md) or fake "
            "(in memory, tests)"),
    _Option("aws_region", ("aws", "region"), _optional, "AWS region (unset: the SDK's default chain)"),
    _Option("aws_endpoint_url", ("aws", "endpoint_url"), _optional,
            "EC2/SSM endpoint URL override (e.g. a moto server, a VPC endpoint)"),
    _Option("aws_pricing_endpoint_url", ("aws", "pricing_endpoint_url"), _optional,
            "Pricing API endpoint URL override (unset: AWS's own; when only --aws-endpoint-url is set, "
            "the Pricing API is not called and the static price table is used)"),
    _Option("default_instance_profile", ("aws", "default_instance_profile"), _optional,
            "instance profile when a Provisioner names none"),
    _Option("eni_limited_pod_density", ("aws", "eni_limited_pod_density"), parse_bool,
            "max pods from ENI limits (false: 110)"),
    _Option("batch_idle_duration", ("batching", "idle_seconds"), _parse_duration,
            "seconds without a new pending pod that close a batch"),
    _Option("batch_max_duration", ("batching", "max_seconds"), _parse_duration,
            "longest a batch stays open, seconds"),
    _Option("untried_pod_grace", ("batching", "untried_grace_seconds"), _parse_duration,
            "seconds after which a pending pod kube-scheduler has not tried yet is provisioned for anyway "
            "(kube-scheduler is backlogged); 0: only pods it marked Unschedulable, as Karpenter"),
    _Option("registration_timeout", ("nodes", "registration_timeout_seconds"), _parse_duration,
            "a node not Ready this many seconds after creation is terminated"),
    _Option("nomination_ttl", ("nodes", "nomination_ttl_seconds"), _parse_duration,
            "a Ready node's nominations expire this many seconds later"),
    _Option("gc_grace", ("gc_grace_seconds",), _parse_duration,
            "an instance with no Node for this many seconds is terminated"),
    _Option("node_labels", ("nodes", "labels"), _parse_node_labels,
            "extra labels for every launched node, k=v,k=v (a key its Provisioner names is the Provisioner's)"),
    _Option("node_annotations", ("nodes", "annotations"), _parse_map,
            "extra annotations for every launched node, k=v,k=v"),
    _Option("log_level", ("logging", "level"), level_name, f"log level: {', '.join(LEVEL_NAMES)}"),
    _Option("log_format", ("logging", "format"), format_name, f"log format: {', '.join(FORMATS)}"),
    _Option("leader_elect", ("leader_election", "enabled"), parse_bool,
            "elect a leader with a coordination.k8s.io/v1 Lease"),
    _Option("lease_name", ("leader_election", "lease_name"), str, "name of the leader-election Lease"),
    _Option("lease_namespace", ("leader_election", "lease_namespace"), str,
            "namespace of the leader-election Lease"),
    _Option("lease_duration", ("leader_election", "lease_duration_seconds"), _parse_duration,
            "seconds a Lease holds without renewal"),
    _Option("renew_deadline", ("leader_election", "renew_deadline_seconds"), _parse_duration,
            "seconds the leader keeps trying to renew before it stops"),
    _Option("retry_period", ("leader_election", "retry_period_seconds"), _parse_duration,
            "seconds between acquire/renew attempts"),
    _Option("listen_address", ("serving", "listen_address"), str,
            "host:port serving /healthz, /readyz and /metrics"),
    _Option("resync_period", ("resync_seconds",), _parse_duration,
            "seconds between full re-reconciles of every object"),
    _Option("extender_address", ("serving", "extender_address"), str,
            "host:port to also serve the scheduler extender (/filter, /prioritize) on, plain HTTP, "
            "from this process's cache; empty: not served (use groupless extender)"),
    _Option("consolidation_interval", ("consolidation", "interval_seconds"), _parse_duration,
            "seconds between consolidation passes"),
    _Option("consolidation_settle_period", ("consolidation", "settle_seconds"), _parse_duration,
            "a node is a consolidation candidate once its pods have not changed for this many seconds"),
    _Option("consolidation_validation_period", ("consolidation", "validation_seconds"), _parse_duration,
            "seconds between a consolidation decision and its re-validation just before it acts"),
    _Option("consolidation_min_savings", ("consolidation", "min_savings_fraction"), _fraction,
            "a consolidation move must save at least this share of its nodes' price (0-1 or a percentage)"),
    _Option("consolidation_max_disrupted", ("consolidation", "max_disrupted_share"), _fraction,
            "at most this share of the consolidating Provisioners' nodes (at least one) disrupted at once"),
    _Option("consolidation_spot_options", ("consolidation", "spot_options"), _count,
            "spot nodes are replaced by spot only with at least this many cheaper instance types, else only deleted"),
    _Option("instance_types", ("kwok", "instance_types_file"), _optional,
            "kwok only: file with the DescribeInstanceTypes answer (JSON) of the simulated catalog "
            "(unset: the default catalog of 42 types in ap-south-1a/b/c)"),
    _Option("offerings", ("kwok", "offerings_file"), _optional,
            "kwok only: file with the DescribeInstanceTypeOfferings answer (JSON, availability zones of one "
            "region) of the simulated catalog (unset: the default catalog's zones)"),
)


def _value(settings: ControllerSettings, option: _Option) -> Any:
    """The value of ``option`` in ``settings`` (follows its attribute path)."""
    value: Any = settings
    for attribute in option.path:
        value = getattr(value, attribute)
    return value


def _build(values: Mapping[tuple[str, ...], Any]) -> ControllerSettings:
    """:class:`ControllerSettings` with the given attribute paths set, defaults elsewhere."""
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        if len(path) == 1:
            top[path[0]] = value
        else:
            groups.setdefault(path[0], {})[path[1]] = value
    defaults = ControllerSettings()
    for group, changes in groups.items():
        top[group] = replace(getattr(defaults, group), **changes)
    return replace(defaults, **top)


def env_name(option: str) -> str:
    """``cluster_name`` -> ``GROUPLESS_CLUSTER_NAME``."""
    return ENV_PREFIX + option.upper()


def flag_name(option: str) -> str:
    """``cluster_name`` -> ``--cluster-name``."""
    return "--" + option.replace("_", "-")


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or value == "":
        return "unset"
    return str(value)


def _metavar(option: _Option) -> str:
    if option.parse is _parse_duration:
        return "DURATION"
    if option.parse is parse_bool:
        return "BOOL"
    if option.parse in (_parse_map, _parse_node_labels):
        return "K=V,..."
    return option.name.upper()


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Add one flag per setting to ``parser``; defaults (from ``environ`` when set) appear in ``--help``.

    Flags are parsed as raw strings and converted in :func:`from_args`, so a bad environment
    variable is reported there with its name rather than as an argparse usage error.
    """
    env = os.environ if environ is None else environ
    defaults = ControllerSettings()
    for option in _OPTIONS:
        current = env.get(env_name(option.name))
        shown = current if current is not None else _show(_value(defaults, option))
        parser.add_argument(
            flag_name(option.name),
            dest=option.name,
            default=None,
            metavar=_metavar(option),
            help=f"{option.help} (env {env_name(option.name)}; default: {shown})",
        )


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ControllerSettings:
    """Settings from parsed flags, then ``GROUPLESS_*`` variables, then defaults.

    Raises SettingsError naming the flag, the variable and the bad value.
    """
    env = os.environ if environ is None else environ
    values: dict[tuple[str, ...], Any] = {}
    for option in _OPTIONS:
        raw = getattr(args, option.name, None)
        source = flag_name(option.name)
        if raw is None:
            raw = env.get(env_name(option.name))
            source = env_name(option.name)
        if raw is None:
            continue
        try:
            values[option.path] = option.parse(raw)
        except ValueError as error:
            raise SettingsError(f"{source} ({flag_name(option.name)} / {env_name(option.name)}): {error}") from error
    if values.get(("kubeconfig",)) is None and env.get("KUBECONFIG"):
        values[("kubeconfig",)] = env["KUBECONFIG"]
    settings = _build(values)
    validate(settings)
    return settings


def validate(settings: ControllerSettings) -> None:
    """Cross-field rules; SettingsError naming the flags.

    client-go's leader election needs lease-duration > renew-deadline > retry-period > 0; a
    batch's idle window cannot exceed its maximum; the catalog files are the kwok provider's.
    """
    election = settings.leader_election
    if election.enabled and not (
        election.lease_duration_seconds > election.renew_deadline_seconds > election.retry_period_seconds > 0
    ):
        raise SettingsError(
            f"--lease-duration ({election.lease_duration_seconds}) > "
            f"--renew-deadline ({election.renew_deadline_seconds}) > "
            f"--retry-period ({election.retry_period_seconds}) > 0 is required for leader election"
        )
    if settings.cloud_provider != "kwok" and (settings.kwok.instance_types_file or settings.kwok.offerings_file):
        raise SettingsError(
            "--instance-types and --offerings (GROUPLESS_INSTANCE_TYPES, GROUPLESS_OFFERINGS) apply to "
            f"--cloud-provider kwok only, not {settings.cloud_provider}"
        )
    if settings.batching.idle_seconds > settings.batching.max_seconds:
        raise SettingsError(
            f"--batch-idle-duration ({settings.batching.idle_seconds}) must not exceed "
            f"--batch-max-duration ({settings.batching.max_seconds})"
        )


def from_mapping(values: Mapping[str, str], environ: Mapping[str, str] | None = None) -> ControllerSettings:
    """Settings from raw strings keyed by setting name (``{"cluster_name": "x", ...}``; tests and embedding).

    The names are the flags' without the dashes (:func:`option_names`); SettingsError for others.
    """
    names = set(option_names())
    unknown = sorted(set(values) - names)
    if unknown:
        raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
    namespace = argparse.Namespace(**{option.name: values.get(option.name) for option in _OPTIONS})
    return from_args(namespace, {} if environ is None else environ)


def option_names() -> Sequence[str]:
    """Every setting's name (the flag without ``--``, dashes as underscores), in ``--help`` order."""
    return [option.name for option in _OPTIONS]
