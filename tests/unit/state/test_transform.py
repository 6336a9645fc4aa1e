"""The cache's transform: what it drops, and that every reader of the model reads the same from what it keeps.

The objects are as a kube-apiserver returns them for a Deployment's pod run by kwok and for a
Node launched by Groupless (managed fields, images, environment, probes, projected volumes,
container statuses, node images and addresses), with every field Groupless reads set to a
value that matters: affinities, spread, tolerations, host ports, a sidecar, overhead, a claim
bound to a zonal volume, nominations, price, taints. Each reader of :mod:`provisioner.model`,
:mod:`provisioner.scheduling` and :mod:`provisioner.state` gives the same answer on the
stripped object as on the full one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from provisioner.cloudprovider.kwok import machine_from_node
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.pods import bound_since, is_terminal, not_provisionable_reason
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.pods import effective_requests, pod_from_manifest, pod_requests
from provisioner.scheduling.volumes import volume_requirements
from provisioner.state.cluster import ClusterState
from provisioner.state.nodes import state_node
from provisioner.state.transform import LAST_APPLIED, keep_all, strip

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}]


def container(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name, "image": f"registry.example.com/{name}:1.0", "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/app"], "args": ["--port=8080"],
        "env": [{"name": "MODE", "value": "prod"}, {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
        "securityContext": {"runAsNonRoot": True},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        **extra,
    }


def full_pod(node_name: str | None = None) -> dict[str, Any]:
    labels = {"app": "web", "pod-template-hash": "7d9f8c6b5"}
    spec: dict[str, Any] = {
        "containers": [
            container("web", "900m", "3100Mi", ports=[{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]),
            container("proxy", "100m", "128Mi"),
        ],
        "initContainers": [
            container("migrate", "2", "1Gi"),
            container("log-shipper", "50m", "64Mi", restartPolicy="Always"),
        ],
        "ephemeralContainers": [{"name": "debug", "image": "busybox", "stdin": True, "tty": True}],
        "overhead": {"cpu": "10m", "memory": "16Mi"},
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1b"]}]}},
                ],
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}},
            ]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone",
                                                   "labelSelector": {"matchLabels": {"app": "cache"}}}},
            ]},
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
                                       "labelSelector": {"matchLabels": {"app": "web"}},
                                       "matchLabelKeys": ["pod-template-hash"]}],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "zonal", "resources": {"requests": {"storage": "1Gi"}}}}}},
            {"name": "kube-api-access-x", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
            {"name": "settings", "configMap": {"name": "web-settings"}},
        ],
        "priorityClassName": "high", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority",
        "schedulerName": "default-scheduler", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "enableServiceLinks": True,
        "securityContext": {"fsGroup": 2000},
    }
    status: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/3 nodes are available", "lastTransitionTime": "2026-12-01T00:00:01Z"}],
        "qosClass": "Burstable",
    }
    if node_name:
        spec["nodeName"] = node_name
        status = {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.0.3.7", "podIPs": [{"ip": "10.0.3.7"}],
            "startTime": "2026-12-01T00:00:05Z", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T00:00:02Z"},
                           {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:09Z"}],
            "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0, "image": "registry.example.com/web:1.0",
                                   "imageID": "sha256:1", "state": {"running": {"startedAt": "2026-12-01T00:00:06Z"}}}],
        }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8c6b5-abcde", "generateName": "web-7d9f8c6b5-", "namespace": "shop",
            "uid": "pod-uid-1", "resourceVersion": "4242", "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": labels, "annotations": {"karpenter.sh/do-not-evict": "true", LAST_APPLIED: "{}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                                 "uid": "rs-uid", "controller": True, "blockOwnerDeletion": True}],
            "managedFields": copy.deepcopy(MANAGED),
        },
        "spec": spec,
        "status": status,
    }


def full_node() -> dict[str, Any]:
    nominations = nom.encode(nom.nominate(nom.EMPTY, "pod-uid-2", "shop/web-2", effective_requests(full_pod()),
                                          1_767_225_900.0))
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "kwok-0123456789abcdef", "uid": "node-uid", "resourceVersion": "77",
            "creationTimestamp": "2026-12-01T00:00:00Z", "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/provisioner-name": "default", "node.kubernetes.io/instance-type": "m6g.xlarge",
                       "topology.kubernetes.io/zone": "ap-south-1b", "karpenter.sh/capacity-type": "spot",
                       "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux", "kwok.x-k8s.io/node": "fake",
                       "kubernetes.io/hostname": "kwok-0123456789abcdef", "groupless.dev/node-request": "nr-1",
                       "karpenter.k8s.aws/instance-cpu": "4"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "groupless.dev/price-per-hour": "0.061200",
                            "groupless.dev/nominations": nominations, "node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": copy.deepcopy(MANAGED),
        },
        "spec": {"providerID": "kwok://kwok-0123456789abcdef",
                 "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"},
                            {"key": "karpenter.sh/not-ready", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58", "ephemeral-storage": "20Gi"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58", "ephemeral-storage": "18Gi"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": "2026-12-01T00:01:00Z", "lastTransitionTime": "2026-12-01T00:00:03Z"},
                           {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "kwok-0"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "arm64", "kubeletVersion": "fake", "operatingSystem": "linux"},
            "images": [{"names": ["registry.example.com/web:1.0"], "sizeBytes": 123456789}],
        },
    }


def daemonset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "log-agent", "namespace": "logging", "uid": "ds-uid", "managedFields": copy.deepcopy(MANAGED),
                     "annotations": {LAST_APPLIED: json.dumps({"kind": "DaemonSet"})}},
        "spec": {"selector": {"matchLabels": {"app": "log-agent"}}, "template": {
            "metadata": {"labels": {"app": "log-agent"}},
            "spec": {"containers": [container("agent", "100m", "200Mi", ports=[{"containerPort": 24224, "hostPort": 24224}]),
                                    {"name": "no-requests", "image": "sidecar:1"}],
                     "tolerations": [{"operator": "Exists"}],
                     "nodeSelector": {"kubernetes.io/os": "linux"}}}},
        "status": {"desiredNumberScheduled": 3, "numberReady": 3},
    }


LIMIT_RANGE = {"metadata": {"name": "defaults", "namespace": "logging"},
               "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "50m", "memory": "64Mi"}}]}}
PVC = {"metadata": {"name": "data-web-0", "namespace": "shop"}, "spec": {"volumeName": "pv-1", "storageClassName": "zonal"}}
PV = {"metadata": {"name": "pv-1"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["ap-south-1b"]}]}]}}}}
ZONAL = {"metadata": {"name": "zonal"}, "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["ap-south-1a"]}]}]}


def without_last_applied(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the last-applied annotation: a reader that keeps every annotation (a Pod's) sees it go."""
    copied = copy.deepcopy(obj)
    copied["metadata"].get("annotations", {}).pop(LAST_APPLIED, None)
    return copied


def as_dict(value: Any) -> Any:
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value


def test_the_transform_drops_what_no_reader_reads_and_leaves_its_argument_alone() -> None:
    pod, node = full_pod("kwok-0123456789abcdef"), full_node()
    before = copy.deepcopy((pod, node))
    stripped_pod, stripped_node = strip("Pod", pod), strip("Node", node)
    assert (pod, node) == before  # never mutated

    assert "managedFields" not in stripped_pod["metadata"]
    assert stripped_pod["metadata"]["annotations"] == {"karpenter.sh/do-not-evict": "true"}
    assert [sorted(c) for c in stripped_pod["spec"]["containers"]] == [["name", "ports", "resources"], ["name", "resources"]]
    assert [sorted(c) for c in stripped_pod["spec"]["initContainers"]] == [["name", "resources"],
                                                                         ["name", "resources", "restartPolicy"]]
    assert "ephemeralContainers" not in stripped_pod["spec"]
    assert stripped_pod["spec"]["volumes"][:2] == pod["spec"]["volumes"][:2]  # claims keep their source
    assert stripped_pod["spec"]["volumes"][2:] == [{"name": "kube-api-access-x"}, {"name": "settings"}]
    assert sorted(stripped_pod["status"]) == ["conditions", "phase"]
    assert sorted(stripped_node["status"]) == ["allocatable", "capacity", "conditions"]
    assert stripped_node["spec"] == node["spec"] and stripped_node["metadata"]["annotations"] == node["metadata"]["annotations"]
    ds = strip("DaemonSet", daemonset())
    assert "managedFields" not in ds["metadata"] and LAST_APPLIED not in ds["metadata"]["annotations"]
    assert [sorted(c) for c in ds["spec"]["template"]["spec"]["containers"]] == [["name", "ports", "resources"], ["name"]]
    # the stripped objects are a fraction of the full ones
    assert len(json.dumps(stripped_pod)) < 0.6 * len(json.dumps(pod))
    assert len(json.dumps(stripped_node)) < 0.8 * len(json.dumps(node))
    # other kinds lose only managed fields and the last-applied copy
    pvc = {**PVC, "metadata": {**PVC["metadata"], "managedFields": MANAGED, "annotations": {LAST_APPLIED: "{}", "a": "b"}}}
    assert strip("PersistentVolumeClaim", pvc) == {**PVC, "metadata": {**PVC["metadata"], "annotations": {"a": "b"}}}


def test_every_pod_reader_reads_the_same_from_the_stripped_pod() -> None:
    for full in (full_pod(), full_pod("kwok-0123456789abcdef")):
        stripped, pod = strip("Pod", full), without_last_applied(full)
        for read in (
            lambda p: as_dict(pod_from_manifest(p, volume_requirements(p, [PVC], [PV], [ZONAL]))),
            lambda p: volume_requirements(p, [PVC], [PV], [ZONAL]),
            pod_requests, effective_requests, not_provisionable_reason, is_terminal, bound_since,
            lambda p: (objects.key(p), objects.uid(p), objects.labels(p), objects.annotations_of(p),
                       objects.controller_owner_kind(p), objects.deleting(p)),
        ):
            assert read(stripped) == read(pod)
    assert pod_from_manifest(full_pod()).host_ports  # the fields compared are really there
    assert pod_from_manifest(full_pod()).volume_requirements == ()
    assert len(volume_requirements(full_pod(), [PVC], [PV], [ZONAL])) == 2


def test_the_node_view_reads_the_same_from_stripped_objects() -> None:
    node, pods = full_node(), [without_last_applied(full_pod("kwok-0123456789abcdef"))]
    full = state_node(node, pods)
    kept = state_node(strip("Node", node), [strip("Pod", p) for p in pods])
    assert full is not None and kept is not None
    fields = [f.name for f in dataclasses.fields(full) if f.name not in ("node", "pods")]
    assert {f: getattr(kept, f) for f in fields} == {f: getattr(full, f) for f in fields}
    assert (kept.bound_pods, kept.host_ports, as_dict(kept.solver_node)) == (full.bound_pods, full.host_ports,
                                                                             as_dict(full.solver_node))
    assert full.price == 0.0612 and full.nominations.pods and full.host_ports and full.taints
    assert machine_from_node(strip("Node", node)) == machine_from_node(node)


def test_a_daemonset_pod_reads_the_same_from_the_stripped_daemonset() -> None:
    ds = daemonset()
    assert as_dict(daemonset_pod(strip("DaemonSet", ds), [LIMIT_RANGE])) == as_dict(daemonset_pod(ds, [LIMIT_RANGE]))
    assert daemonset_pod(ds, [LIMIT_RANGE]).requests.get("cpu") == 150  # the LimitRange default applied


class _API:
    """A KubeAPI with one list answer per kind (the cache's resync reads only ``list``)."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        self.items = items

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> Any:
        return copy.deepcopy(self.items.get(kind, [])), "1"


def test_the_cache_stores_stripped_objects_unless_told_otherwise() -> None:
    api = _API({"Pod": [full_pod("kwok-0123456789abcdef")], "Node": [full_node()], "DaemonSet": [daemonset()]})
    kinds = ("Pod", "Node", "DaemonSet")
    cached = ClusterState(api, kinds=kinds)  # type: ignore[arg-type]
    whole = ClusterState(api, kinds=kinds, transform=keep_all)  # type: ignore[arg-type]
    for state in (cached, whole):
        state.resync()
    assert cached.objects("Pod") == [strip("Pod", full_pod("kwok-0123456789abcdef"))]
    assert cached.objects("Node") == [strip("Node", full_node())]
    assert cached.objects("DaemonSet") == [strip("DaemonSet", daemonset())]
    assert whole.objects("Pod") == [full_pod("kwok-0123456789abcdef")]
