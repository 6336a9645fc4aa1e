"""What the cluster state cache keeps of each object: the fields Groupless reads, not the rest.

client-go's informers take a ``TransformFunc`` for this (``SharedIndexInformer.SetTransform``):
Karpenter, the Cluster Autoscaler and kube-scheduler itself drop ``metadata.managedFields``
before an object is stored, because the cache holds every Pod and Node of the cluster for the
life of the process and most of each object is never read. The same here, per kind
(:func:`strip`), applied by :class:`~provisioner.state.cluster.ClusterState` to every listed
and watched object before it is stored:

* every kind: ``metadata.managedFields`` and the
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation (a copy of the whole
  manifest) go;
* Pods (and a DaemonSet's pod template): each container keeps its ``name``, ``resources``,
  ``ports`` and ``restartPolicy`` (requests, host ports, sidecars); the image, command,
  environment, mounts, probes and security context go, and so do ephemeral containers. A
  volume keeps its whole source only when it is a ``persistentVolumeClaim`` or an
  ``ephemeral`` claim template (volume topology), else only its name. Every other ``spec``
  field is kept (scalars cost little and the scheduling fields are all there). ``status``
  keeps ``phase``, ``conditions`` and ``nominatedNodeName``; container statuses, IPs, the QoS
  class and the start time go;
* Nodes: ``status`` keeps ``allocatable``, ``capacity`` and ``conditions``; images, addresses,
  node info, volumes and daemon endpoints go. ``spec`` is kept whole.

Which fields survive is checked against every reader by
``tests/integration/state/test_transform_fields.py`` (the component suites of the controllers,
the extender and the metrics run over recording copies of enriched objects; a field they read
that is not kept fails it) and ``tests/unit/state/test_transform.py`` (each reader of the model
answers the same from the stripped form of a full pod, node and DaemonSet). A transform never
mutates its argument (the objects a fake API hands out may be shared); it returns a new object
sharing the untouched parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provisioner.kube.api import Object

#: The annotation ``kubectl apply`` writes: the whole last applied manifest, never read here.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: What a container keeps: kube-scheduler's requests (``resources``, ``restartPolicy`` of a
#: sidecar init container) and host ports (``ports``), and its name.
CONTAINER_FIELDS = ("name", "resources", "ports", "restartPolicy")
#: The volume sources whose claims carry topology (``provisioner.scheduling.volumes``).
CLAIM_SOURCES = ("persistentVolumeClaim", "ephemeral")
#: What a pod's ``status`` keeps.
POD_STATUS_FIELDS = ("phase", "conditions", "nominatedNodeName")
#: What a Node's ``status`` keeps.
NODE_STATUS_FIELDS = ("allocatable", "capacity", "conditions")
#: Pod spec fields that are dropped whole.
DROPPED_POD_SPEC_FIELDS = ("ephemeralContainers",)

Transform = Callable[[str, Object], Object]


def _metadata(meta: Any) -> Any:
    if not isinstance(meta, Mapping):
        return meta
    stripped = {key: value for key, value in meta.items() if key != "managedFields"}
    annotations = stripped.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        stripped["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return stripped


def _containers(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    return [{k: c[k] for k in CONTAINER_FIELDS if k in c} if isinstance(c, Mapping) else c for c in items]


def _volume(volume: Any) -> Any:
    if not isinstance(volume, Mapping) or any(source in volume for source in CLAIM_SOURCES):
        return volume
    return {"name": volume["name"]} if "name" in volume else {}


def pod_spec(spec: Any) -> Any:
    """A pod ``spec`` as the cache keeps it (also a DaemonSet's ``spec.template.spec``)."""
    if not isinstance(spec, Mapping):
        return spec
    stripped = {key: value for key, value in spec.items() if key not in DROPPED_POD_SPEC_FIELDS}
    for key in ("containers", "initContainers"):
        if key in stripped:
            stripped[key] = _containers(stripped[key])
    volumes = stripped.get("volumes")
    if isinstance(volumes, list):
        stripped["volumes"] = [_volume(v) for v in volumes]
    return stripped


def _kept(status: Any, fields: tuple[str, ...]) -> Any:
    if not isinstance(status, Mapping):
        return status
    return {key: status[key] for key in fields if key in status}


def _pod(obj: Object) -> Object:
    stripped = dict(obj)
    if "spec" in stripped:
        stripped["spec"] = pod_spec(stripped["spec"])
    if "status" in stripped:
        stripped["status"] = _kept(stripped["status"], POD_STATUS_FIELDS)
    return stripped


def _node(obj: Object) -> Object:
    stripped = dict(obj)
    if "status" in stripped:
        stripped["status"] = _kept(stripped["status"], NODE_STATUS_FIELDS)
    return stripped


def _daemonset(obj: Object) -> Object:
    stripped = dict(obj)
    spec = stripped.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if isinstance(spec, Mapping) and isinstance(template, Mapping):
        template = {**template, "metadata": _metadata(template.get("metadata"))} if "metadata" in template else dict(template)
        if "spec" in template:
            template["spec"] = pod_spec(template["spec"])
        stripped["spec"] = {**spec, "template": template}
    return stripped


_BY_KIND: dict[str, Callable[[Object], Object]] = {"Pod": _pod, "Node": _node, "DaemonSet": _daemonset}


def strip(kind: str, obj: Object) -> Object:
    """``obj`` (a ``kind``) as the cluster state cache keeps it: a new object, ``obj`` untouched (see the module docstring).

    Odd shapes (a field of the wrong type) are kept as they are: the readers report them.
    """
    if not isinstance(obj, Mapping):
        return obj
    stripped = _BY_KIND.get(kind, dict)(obj)
    if "metadata" in stripped:
        stripped["metadata"] = _metadata(stripped["metadata"])
    return stripped


def keep_all(kind: str, obj: Object) -> Object:
    """The identity transform: the cache keeps whole objects (tests comparing with :func:`strip`)."""
    return obj
