"""Bootstrap user data per AMI family: how a new instance joins the cluster with its labels and taints.

Why the node registers its own labels and taints (instead of the controller patching them
later): the scheduler must never see the node without its taints (pods could land on it), and
the startup taint ``karpenter.sh/not-ready`` only protects if the kubelet registers with it.

Formats (pure functions, deterministic output so launch templates hash stably):

- AL2023: a MIME multi-part document with one ``application/node.eks.aws`` part holding a
  nodeadm ``NodeConfig`` (``node.eks.aws/v1alpha1``: ``spec.cluster`` name, apiServerEndpoint,
  certificateAuthority, cidr; ``spec.kubelet.config`` for maxPods, podsPerCore, clusterDNS and
  reservations;
  ``spec.kubelet.flags`` for ``--node-labels`` and ``--register-with-taints``);
- AL2 and Ubuntu: a shell script calling ``/etc/eks/bootstrap.sh '<cluster>'`` with
  ``--apiserver-endpoint``, ``--b64-cluster-ca``, ``--dns-cluster-ip``, ``--use-max-pods false``
  when the pod count is not ENI-limited, and ``--kubelet-extra-args`` carrying
  ``--node-labels``, ``--register-with-taints``, ``--max-pods``, ``--pods-per-core`` and reservations;
- Bottlerocket: TOML ``[settings.kubernetes]`` with ``node-labels`` and ``node-taints`` tables
  (its settings have no pods-per-core: ``podsPerCore`` is ignored, as Karpenter ignores it).

Labels the kubelet may not set on itself (NodeRestriction: ``kubernetes.io``/``k8s.io`` domains
other than ``node.kubernetes.io``, ``kubelet.kubernetes.io`` and the well-known topology,
arch, os and instance-type labels) are left out; the controller sets those on the Node object.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from provisioner.api.types import KubeletConfiguration
from provisioner.cloudprovider.aws.amifamily import AL2, AL2023, BOTTLEROCKET, UBUNTU

MIME_BOUNDARY = "//"
_KUBELET_SETTABLE = frozenset(
    {
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "kubernetes.io/hostname",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """What every family's user data needs. ``max_pods`` None lets the AMI compute ENI-limited pods."""

    cluster_name: str
    cluster_endpoint: str
    cluster_ca_bundle: str
    service_cidr: str
    labels: tuple[tuple[str, str], ...]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    max_pods: int | None = None
    cluster_dns: str | None = None
    kubelet: KubeletConfiguration | None = None

    @property
    def pods_per_core(self) -> int | None:
        """``kubeletConfiguration.podsPerCore`` (None or 0: not passed to the kubelet)."""
        return self.kubelet.pods_per_core if self.kubelet is not None else None


def kubelet_may_set(key: str) -> bool:
    """True when NodeRestriction lets a kubelet register this label on its own Node."""
    if key in _KUBELET_SETTABLE:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    restricted = any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    if not restricted:
        return True
    return any(
        domain == d or domain.endswith("." + d) for d in ("node.kubernetes.io", "kubelet.kubernetes.io")
    )


def make_bootstrap(
    cluster_name: str,
    cluster_endpoint: str,
    cluster_ca_bundle: str,
    service_cidr: str,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    max_pods: int | None = None,
    cluster_dns: str | None = None,
    kubelet: KubeletConfiguration | None = None,
) -> Bootstrap:
    """A :class:`Bootstrap` with labels filtered for NodeRestriction and both lists sorted."""
    dns = cluster_dns
    if kubelet is not None and kubelet.cluster_dns:
        dns = kubelet.cluster_dns[0]
    return Bootstrap(
        cluster_name=cluster_name,
        cluster_endpoint=cluster_endpoint,
        cluster_ca_bundle=cluster_ca_bundle,
        service_cidr=service_cidr,
        labels=tuple(sorted((k, v) for k, v in labels.items() if kubelet_may_set(k))),
        taints=tuple(sorted((t["key"], t.get("value", "") or "", t["effect"]) for t in taints)),
        max_pods=max_pods,
        cluster_dns=dns,
        kubelet=kubelet,
    )


def _labels_flag(b: Bootstrap) -> str:
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in b.labels)


def _taints_flag(b: Bootstrap) -> str:
    return "--register-with-taints=" + ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in b.taints)


def _reserved(pairs: tuple[tuple[str, str], ...] | None) -> dict[str, str]:
    return dict(sorted(pairs or ()))


def al2023(b: Bootstrap) -> str:
    """MIME multi-part user data with a nodeadm ``NodeConfig``."""
    config: dict[str, object] = {}
    if b.max_pods is not None:
        config["maxPods"] = b.max_pods
    if b.pods_per_core:
        config["podsPerCore"] = b.pods_per_core
    if b.cluster_dns:
        config["clusterDNS"] = [b.cluster_dns]
    if b.kubelet is not None:
        if b.kubelet.system_reserved:
            config["systemReserved"] = _reserved(b.kubelet.system_reserved)
        if b.kubelet.kube_reserved:
            config["kubeReserved"] = _reserved(b.kubelet.kube_reserved)
        if b.kubelet.eviction_hard:
            config["evictionHard"] = _reserved(b.kubelet.eviction_hard)
    flags = []
    if b.labels:
        flags.append(_labels_flag(b))
    if b.taints:
        flags.append(_taints_flag(b))
    kubelet: dict[str, object] = {}
    if config:
        kubelet["config"] = config
    if flags:
        kubelet["flags"] = flags
    spec: dict[str, object] = {
        "cluster": {
            "name": b.cluster_name,
            "apiServerEndpoint": b.cluster_endpoint,
            "certificateAuthority": b.cluster_ca_bundle,
            "cidr": b.service_cidr,
        }
    }
    if kubelet:
        spec["kubelet"] = kubelet
    node_config = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    body = yaml.safe_dump(node_config, sort_keys=True, default_flow_style=False)
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n"
        "\n"
        "---\n"
        f"{body}"
        "\n"
        f"--{MIME_BOUNDARY}--\n"
    )


def _kubelet_flag_map(name: str, pairs: tuple[tuple[str, str], ...] | None, sep: str = "=") -> list[str]:
    if not pairs:
        return []
    return [f"--{name}=" + ",".join(f"{k}{sep}{v}" for k, v in sorted(pairs))]


def bootstrap_sh(b: Bootstrap) -> str:
    """AL2/Ubuntu: ``/etc/eks/bootstrap.sh`` with the cluster's endpoint, CA and kubelet arguments."""
    extra = []
    if b.labels:
        extra.append(_labels_flag(b))
    if b.taints:
        extra.append(_taints_flag(b))
    if b.max_pods is not None:
        extra.append(f"--max-pods={b.max_pods}")
    if b.pods_per_core:
        extra.append(f"--pods-per-core={b.pods_per_core}")
    if b.kubelet is not None:
        extra += _kubelet_flag_map("system-reserved", b.kubelet.system_reserved)
        extra += _kubelet_flag_map("kube-reserved", b.kubelet.kube_reserved)
        extra += _kubelet_flag_map("eviction-hard", b.kubelet.eviction_hard, "<")
    lines = [
        f"/etc/eks/bootstrap.sh {shlex.quote(b.cluster_name)}",
        f"--apiserver-endpoint {shlex.quote(b.cluster_endpoint)}",
        f"--b64-cluster-ca {shlex.quote(b.cluster_ca_bundle)}",
    ]
    if b.cluster_dns:
        lines.append(f"--dns-cluster-ip {shlex.quote(b.cluster_dns)}")
    if b.max_pods is not None:
        lines.append("--use-max-pods false")
    if extra:
        lines.append(f"--kubelet-extra-args {shlex.quote(' '.join(extra))}")
    return (
        "#!/bin/bash -xe\n"
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
        + " \\\n  ".join(lines)
        + "\n"
    )


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def bottlerocket(b: Bootstrap) -> str:
    """Bottlerocket TOML settings."""
    lines = [
        "[settings.kubernetes]",
        f"api-server = {_toml(b.cluster_endpoint)}",
        f"cluster-certificate = {_toml(b.cluster_ca_bundle)}",
        f"cluster-name = {_toml(b.cluster_name)}",
    ]
    if b.cluster_dns:
        lines.append(f"cluster-dns-ip = {_toml(b.cluster_dns)}")
    if b.max_pods is not None:
        lines.append(f"max-pods = {b.max_pods}")
    tables: list[tuple[str, dict[str, str]]] = []
    if b.kubelet is not None:
        tables += [
            ("system-reserved", _reserved(b.kubelet.system_reserved)),
            ("kube-reserved", _reserved(b.kubelet.kube_reserved)),
            ("eviction-hard", _reserved(b.kubelet.eviction_hard)),
        ]
    tables.append(("node-labels", dict(b.labels)))
    for name, values in tables:
        if values:
            lines += ["", f"[settings.kubernetes.{name}]"]
            lines += [f"{_toml(k)} = {_toml(v)}" for k, v in values.items()]
    if b.taints:
        grouped: dict[str, list[str]] = {}
        for key, value, effect in b.taints:
            grouped.setdefault(key, []).append(f"{value}:{effect}")
        lines += ["", "[settings.kubernetes.node-taints]"]
        lines += [f"{_toml(k)} = [{', '.join(_toml(v) for v in vs)}]" for k, vs in sorted(grouped.items())]
    return "\n".join(lines) + "\n"


def user_data(family: str, b: Bootstrap) -> str:
    """The user data text for ``family`` (one of AL2023, AL2, Bottlerocket, Ubuntu)."""
    if family == AL2023:
        return al2023(b)
    if family in (AL2, UBUNTU):
        return bootstrap_sh(b)
    if family == BOTTLEROCKET:
        return bottlerocket(b)
    raise ValueError(f"unknown amiFamily {family!r}")
