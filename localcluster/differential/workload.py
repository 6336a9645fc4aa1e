"""Seeded random workloads for the differential test: every constraint kind the solver handles.

:func:`generate` turns a seed into a :class:`Workload`: wire objects (dicts, as ``kubectl
apply`` takes them), the same for the same seed and size in any process (``random.Random(seed)``,
no clock, no set iteration). A workload is groups of pods; each group is like the replicas of a
Deployment (label ``app: g<N>``) and draws

* a **request style**: plain requests; an init container larger than the containers; a
  sidecar (an init container with ``restartPolicy: Always``, counted with the containers);
  ``spec.overhead`` from a RuntimeClass; or no requests (the namespace's LimitRange defaults,
  or limits only, which the API server copies to requests, or nothing at all);
* a **placement constraint**: none, ``nodeSelector``, required or preferred node affinity,
  tolerations (with or without the dedicated Provisioner's label), zone or hostname
  topology spread (both ``whenUnsatisfiable`` policies, ``nodeAffinityPolicy``,
  ``nodeTaintsPolicy``, ``minDomains``), required pod anti-affinity or affinity, a host port,
  or a claim bound to a zonal PersistentVolume; spread groups sometimes add a node selector.

Around the groups: one or two Provisioners (a general one, and sometimes a dedicated one with a
taint and a label), sometimes a LimitRange, DaemonSets (with requests, or sized by the
LimitRange), and existing nodes of the general Provisioner with room, partly filled by pods
bound there (some carrying a group's labels, so that topology spread and anti-affinity count
them).

Names are unique per seed (namespace ``diff-<seed>``, cluster-scoped objects prefixed
``diff-<seed>-``), so a workload never sees an earlier one's objects.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The zones of the kwok catalog (``provisioner/cloudprovider/data/kwok-offerings.json``).
ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")
ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"
ARCH_KEY = "kubernetes.io/arch"
CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"
CATEGORY_KEY = "karpenter.k8s.aws/instance-category"
CPU_KEY = "karpenter.k8s.aws/instance-cpu"
NVME_KEY = "karpenter.k8s.aws/instance-local-nvme"
#: The dedicated Provisioner's taint and label.
DEDICATED_TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
DEDICATED_LABEL = ("workload-class", "batch")
#: The subnet and security group selectors of the walkthrough's Provisioner (validation wants a provider).
PROVIDER = {
    "subnetSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
    "securityGroupSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
}
#: Instance types existing nodes are launched as (all meet the general Provisioner's requirements).
EXISTING_TYPES = ("m5.xlarge", "m5.2xlarge", "c5.xlarge", "r5.large", "m6g.xlarge")

REQUEST_STYLES = ("plain", "init", "sidecar", "overhead", "no-requests")
CONSTRAINTS = (
    "none", "node-selector", "required-affinity", "preferred-affinity", "toleration", "dedicated",
    "zone-spread", "hostname-spread", "anti-affinity", "pod-affinity", "host-port", "zonal-pvc",
)
_CPU = ("100m", "250m", "500m", "750m", "1", "1500m", "2")
_MEMORY = ("128Mi", "256Mi", "512Mi", "1Gi", "1536Mi", "2Gi", "4Gi")


@dataclass(frozen=True)
class ExistingNode:
    """A node of the general Provisioner that exists before the workload: ``key`` names it in :attr:`Workload.fillers`."""

    key: str
    instance_type: str
    zone: str


@dataclass(frozen=True)
class Workload:
    """One seeded workload.

    ``setup``: objects applied first, in order (Namespace, RuntimeClass, Provisioners,
    LimitRange, DaemonSets, PersistentVolumes, claims). ``existing``: nodes launched before the
    pods; ``fillers``: pods bound to them (``spec.nodeName`` is the :attr:`ExistingNode.key`
    until the driver knows the node's name). ``pods``: the pods to plan for and create.
    ``features``: how many groups drew each request style and constraint, and counts of the
    other parts (for reports).
    """

    seed: int
    namespace: str
    setup: tuple[dict[str, Any], ...]
    existing: tuple[ExistingNode, ...]
    fillers: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    features: Mapping[str, int] = field(default_factory=dict)

    @property
    def provisioners(self) -> list[dict[str, Any]]:
        return [o for o in self.setup if o["kind"] == "Provisioner"]

    @property
    def general_provisioner(self) -> str:
        """The name of the Provisioner existing nodes belong to."""
        return f"diff-{self.seed}-general"


def _pod(namespace: str, name: str, labels: Mapping[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    spec.setdefault("terminationGracePeriodSeconds", 0)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "spec": spec}


def _container(name: str, requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None,
               **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10"}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
        # limits as large as the requests: a LimitRange's default limits (smaller) never apply
        # to a container that asks for more, which the API server would refuse
        resources["limits"] = dict(limits or requests)
    elif limits:
        resources["limits"] = dict(limits)
    if resources:
        container["resources"] = resources
    container.update(extra)
    return container


def _requests(rng: random.Random) -> dict[str, str]:
    return {"cpu": rng.choice(_CPU), "memory": rng.choice(_MEMORY)}


class _Generator:
    def __init__(self, seed: int, pods: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.total = pods
        self.namespace = f"diff-{seed}"
        self.prefix = f"diff-{seed}"
        self.features: Counter[str] = Counter()
        self.setup: list[dict[str, Any]] = []
        self.pvs: list[dict[str, Any]] = []
        self.pvcs: list[dict[str, Any]] = []
        self.groups: list[tuple[str, str]] = []  # (app label, constraint)
        self.dedicated = False
        self.limit_range = False
        self.runtime_class = f"{self.prefix}-overhead"
        self.overhead = {"cpu": "100m", "memory": "64Mi"}

    # ------------------------------------------------------------------ the cluster around the pods
    def provisioners(self) -> None:
        rng = self.rng
        capacity_types = rng.choice((["on-demand"], ["spot", "on-demand"]))
        requirements: list[dict[str, Any]] = [
            {"key": CAPACITY_TYPE_KEY, "operator": "In", "values": capacity_types},
            {"key": ARCH_KEY, "operator": "In", "values": ["amd64", "arm64"]},
        ]
        if rng.random() < 0.5:
            requirements.append({"key": CATEGORY_KEY, "operator": "In", "values": ["c", "m", "r"]})
        self.setup.append({
            "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
            "metadata": {"name": f"{self.prefix}-general"},
            "spec": {"requirements": requirements, "provider": PROVIDER},
        })
        self.features[f"capacity-types={'+'.join(capacity_types)}"] += 1
        if rng.random() < 0.5:
            self.dedicated = True
            self.features["dedicated-provisioner"] += 1
            self.setup.append({
                "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
                "metadata": {"name": f"{self.prefix}-dedicated"},
                "spec": {
                    "weight": rng.choice((10, 50)),
                    "requirements": [
                        {"key": CAPACITY_TYPE_KEY, "operator": "In", "values": ["on-demand"]},
                        {"key": ARCH_KEY, "operator": "In", "values": ["amd64"]},
                    ],
                    "labels": {DEDICATED_LABEL[0]: DEDICATED_LABEL[1]},
                    "taints": [dict(DEDICATED_TAINT)],
                    "provider": PROVIDER,
                },
            })

    def namespace_objects(self) -> None:
        rng = self.rng
        self.setup.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        self.setup.append({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": self.runtime_class},
            "handler": "runc", "overhead": {"podFixed": dict(self.overhead)},
        })
        if rng.random() < 0.5:
            self.limit_range = True
            self.features["limit-range"] += 1
            limits: dict[str, Any] = {"type": "Container", "default": {"cpu": "400m", "memory": "384Mi"}}
            if rng.random() < 0.6:
                limits["defaultRequest"] = {"cpu": "150m", "memory": "192Mi"}
            self.setup.append({
                "apiVersion": "v1", "kind": "LimitRange",
                "metadata": {"name": "defaults", "namespace": self.namespace},
                "spec": {"limits": [limits]},
            })

    def daemonsets(self) -> None:
        rng = self.rng
        if rng.random() < 0.5:
            self.features["daemonset"] += 1
            self.setup.append(self._daemonset("node-agent", {"tolerations": [{"operator": "Exists"}]},
                                              _container("agent", {"cpu": "100m", "memory": "128Mi"})))
        if rng.random() < 0.4:
            self.features["daemonset"] += 1
            # sized by the LimitRange when the namespace has one, else requests nothing
            self.setup.append(self._daemonset("amd64-agent", {"nodeSelector": {ARCH_KEY: "amd64"}},
                                              _container("agent")))

    def _daemonset(self, name: str, spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
        labels = {"daemon": name}
        return {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                             "spec": {**spec, "terminationGracePeriodSeconds": 0, "containers": [container]}},
            },
        }

    def existing_nodes(self) -> tuple[list[ExistingNode], list[dict[str, Any]]]:
        rng = self.rng
        if rng.random() < 0.5:
            return [], []
        nodes = [ExistingNode(f"existing-{i}", rng.choice(EXISTING_TYPES), rng.choice(ZONES))
                 for i in range(rng.randint(1, 3))]
        self.features["existing-node"] += len(nodes)
        fillers = []
        counted = [app for app, constraint in self.groups
                   if constraint in ("zone-spread", "hostname-spread", "anti-affinity", "pod-affinity")]
        for node in nodes:
            for j in range(rng.randint(0, 2)):
                labels = {"app": "filler"}
                if counted and rng.random() < 0.5:
                    labels = {"app": rng.choice(counted)}
                    self.features["filler-counted"] += 1
                spec = {"nodeName": node.key,
                        "containers": [_container("c", {"cpu": rng.choice(("250m", "500m", "1")),
                                                        "memory": rng.choice(("256Mi", "512Mi", "1Gi"))})]}
                fillers.append(_pod(self.namespace, f"filler-{node.key}-{j}", labels, spec))
        return nodes, fillers

    # ------------------------------------------------------------------ pods
    def pod_spec(self, style: str) -> dict[str, Any]:
        rng = self.rng
        spec: dict[str, Any]
        if style == "plain":
            containers = [_container("c", _requests(rng))]
            if rng.random() < 0.3:
                containers.append(_container("helper", {"cpu": "100m", "memory": "64Mi"}))
            spec = {"containers": containers}
        elif style == "init":
            main = _requests(rng)
            init = {"cpu": rng.choice(("1", "1500m", "2", "3")), "memory": rng.choice(("512Mi", "1Gi", "3Gi"))}
            spec = {"initContainers": [_container("setup", init)], "containers": [_container("c", main)]}
        elif style == "sidecar":
            spec = {
                "initContainers": [_container("sidecar", {"cpu": "250m", "memory": "128Mi"}, restartPolicy="Always"),
                                   _container("setup", {"cpu": "500m", "memory": "256Mi"})],
                "containers": [_container("c", _requests(rng))],
            }
        elif style == "overhead":
            spec = {"runtimeClassName": self.runtime_class, "overhead": dict(self.overhead),
                    "containers": [_container("c", _requests(rng))]}
        else:  # no-requests: the LimitRange's defaults, limits copied to requests, or nothing
            variant = rng.choice(("nothing", "limits-only"))
            if variant == "limits-only":
                limits = {"cpu": rng.choice(("250m", "500m", "1")), "memory": rng.choice(("256Mi", "512Mi", "1Gi"))}
                spec = {"containers": [_container("c", limits=limits)]}
            else:
                spec = {"containers": [_container("c")]}
            self.features[f"no-requests:{variant}"] += 1
        return spec

    def constrain(self, constraint: str, app: str, spec: dict[str, Any], size: int) -> list[str]:
        """Add ``constraint`` to ``spec`` (one pod template of group ``app``); the PVC names to give each pod, if any."""
        if constraint == "zonal-pvc":
            return [f"{app}-data-{i}" for i in range(size)]
        add = {
            "node-selector": self._node_selector, "required-affinity": self._required_affinity,
            "preferred-affinity": self._preferred_affinity, "toleration": self._toleration,
            "dedicated": self._toleration, "zone-spread": self._zone_spread, "hostname-spread": self._hostname_spread,
            "anti-affinity": self._anti_affinity, "pod-affinity": self._pod_affinity, "host-port": self._host_port,
        }.get(constraint)
        if add is not None:
            add(constraint, app, spec)
        return []

    def _node_selector(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        spec["nodeSelector"] = rng.choice((
            {ZONE_KEY: rng.choice(ZONES)}, {ARCH_KEY: rng.choice(("amd64", "arm64"))},
            {CAPACITY_TYPE_KEY: "on-demand"}, {CATEGORY_KEY: rng.choice(("c", "m", "r"))},
        ))

    def _required_affinity(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        choices: list[list[dict[str, Any]]] = [
            [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": rng.sample(ZONES, 2)}]}],
            [{"matchExpressions": [{"key": CPU_KEY, "operator": "Gt", "values": ["3"]}]}],
            [{"matchExpressions": [{"key": ARCH_KEY, "operator": "NotIn", "values": ["arm64"]}]}],
            [{"matchExpressions": [{"key": NVME_KEY, "operator": "Exists"}]}],
            [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [rng.choice(ZONES)]}]},
             {"matchExpressions": [{"key": ARCH_KEY, "operator": "In", "values": ["arm64"]}]}],
        ]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": rng.choice(choices)}}}

    def _preferred_affinity(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        first, second = rng.sample(ZONES, 2)

        def term(weight: int, key: str, value: str) -> dict[str, Any]:
            return {"weight": weight, "preference": {"matchExpressions": [{"key": key, "operator": "In",
                                                                           "values": [value]}]}}

        choices = [
            [term(80, ZONE_KEY, first), term(20, ARCH_KEY, "arm64")],
            [term(10, ZONE_KEY, first), term(90, ZONE_KEY, second)],
            [term(50, CATEGORY_KEY, "c"), term(30, ARCH_KEY, "amd64")],
        ]
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": rng.choice(choices)}}

    def _toleration(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        spec["tolerations"] = [{"key": DEDICATED_TAINT["key"], "operator": "Equal", "value": DEDICATED_TAINT["value"],
                                "effect": "NoSchedule"}]
        if constraint == "dedicated":
            spec["nodeSelector"] = {DEDICATED_LABEL[0]: DEDICATED_LABEL[1]}

    def _zone_spread(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        when = rng.choice(("DoNotSchedule", "ScheduleAnyway"))
        term: dict[str, Any] = {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": when,
                                "labelSelector": {"matchLabels": {"app": app}}}
        if rng.random() < 0.5:
            term["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if rng.random() < 0.5:
            term["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        if when == "DoNotSchedule" and rng.random() < 0.4:
            term["minDomains"] = rng.choice((2, 3))
        spec["topologySpreadConstraints"] = [term]
        if rng.random() < 0.3:
            spec["nodeSelector"] = {ARCH_KEY: rng.choice(("amd64", "arm64"))}

    def _hostname_spread(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        term: dict[str, Any] = {"maxSkew": rng.choice((1, 2)), "topologyKey": HOSTNAME_KEY,
                                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}
        if rng.random() < 0.3:
            term["minDomains"] = rng.choice((2, 3))
        spec["topologySpreadConstraints"] = [term]

    def _anti_affinity(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME_KEY}]}}
        if self.rng.random() < 0.3:
            spec["nodeSelector"] = {ZONE_KEY: self.rng.choice(ZONES)}

    def _pod_affinity(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        rng = self.rng
        earlier = [a for a, c in self.groups if c != "anti-affinity"]
        target = rng.choice(earlier) if earlier and rng.random() < 0.6 else app
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": target}}, "topologyKey": ZONE_KEY}]}}

    def _host_port(self, constraint: str, app: str, spec: dict[str, Any]) -> None:
        port = 8000 + len(self.groups)
        spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]

    def claim(self, claim: str) -> None:
        zone = self.rng.choice(ZONES)
        pv = f"{self.prefix}-{claim}"
        self.pvs.append({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "zonal",
                "hostPath": {"path": f"/data/{pv}"},
                "claimRef": {"namespace": self.namespace, "name": claim},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]}},
            },
        })
        self.pvcs.append({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": self.namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "zonal", "volumeName": pv,
                     "resources": {"requests": {"storage": "1Gi"}}},
        })

    def pods(self) -> list[dict[str, Any]]:
        rng = self.rng
        constraints = [c for c in CONSTRAINTS if self.dedicated or c != "dedicated"]
        pods: list[dict[str, Any]] = []
        while len(pods) < self.total:
            app = f"g{len(self.groups)}"
            constraint = rng.choice(constraints)
            style = rng.choice(REQUEST_STYLES)
            size = min(self.total - len(pods), rng.randint(2, 8))
            self.features[f"style:{style}"] += 1
            self.features[f"constraint:{constraint}"] += 1
            template = self.pod_spec(style)
            claims = self.constrain(constraint, app, template, size)
            self.groups.append((app, constraint))
            for i in range(size):
                spec = _copy(template)
                if claims:
                    self.claim(claims[i])
                    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claims[i]}}]
                pods.append(_pod(self.namespace, f"{app}-{constraint}-{i}", {"app": app}, spec))
        return pods


def _copy(value: Any) -> Any:
    """A deep copy of a wire value (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def generate(seed: int, pods: int = 50) -> Workload:
    """The workload of ``seed`` with ``pods`` pods to plan (see the module docstring).

    Raises ValueError when ``pods`` < 1.
    """
    if pods < 1:
        raise ValueError(f"pods: at least 1, got {pods}")
    g = _Generator(seed, pods)
    g.provisioners()
    g.namespace_objects()
    g.daemonsets()
    planned = g.pods()
    existing, fillers = g.existing_nodes()
    setup = [*g.setup, *g.pvs, *g.pvcs]
    return Workload(seed=seed, namespace=g.namespace, setup=tuple(setup), existing=tuple(existing),
                    fillers=tuple(fillers), pods=tuple(planned), features=dict(sorted(g.features.items())))


__all__ = ["CONSTRAINTS", "REQUEST_STYLES", "ZONES", "ExistingNode", "Workload", "generate"]
