"""A pytest plugin that records every field read from the cluster state cache and checks the transform keeps it.

``python -m pytest -p tests.integration.state.recording --record-reads FILE <tests>`` runs the
tests with the cache's transform (:func:`provisioner.state.transform.strip`) wrapped: each
object is first *enriched* with a realistic value of every field the transform is meant to drop
(managed fields, the last-applied annotation, container images, environments, mounts and
probes, container statuses, projected volumes, node images and addresses...), then stripped,
and what the cache stores is a recording copy of the stripped object. Every key and index a
reader asks for (``obj["spec"]``, ``.get()``, ``in``, iteration) is recorded with its path. At
the end, each recorded path that exists in the enriched object must exist in the stripped one:
with the same value for a scalar, the same length for a list. The violations (kind, path with
list indexes as ``*``, why) are written to FILE as JSON; ``[]`` when the transform keeps
everything that was read.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.state import cluster as cluster_module
from provisioner.state import transform as transform_module

Path_ = tuple[Any, ...]

MANAGED_FIELDS = [{
    "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
    "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {}}},
}]
CONTAINER_EXTRAS = {
    "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent",
    "command": ["/pause"], "args": ["--verbose"], "workingDir": "/",
    "env": [{"name": "LOG_LEVEL", "value": "debug"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    "envFrom": [{"configMapRef": {"name": "settings"}}],
    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
    "readinessProbe": {"tcpSocket": {"port": 8080}},
    "startupProbe": {"exec": {"command": ["true"]}},
    "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
    "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False},
    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
    "stdin": False, "tty": False,
}
EXTRA_VOLUMES = [
    {"name": "kube-api-access", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}},
    {"name": "scratch", "emptyDir": {}},
    {"name": "settings", "configMap": {"name": "settings"}},
]
POD_STATUS_EXTRAS = {
    "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}],
    "qosClass": "Burstable", "message": "a message", "resize": "",
    "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "image": "registry.k8s.io/pause:3.10",
                           "imageID": "sha256:abc", "containerID": "containerd://abc", "started": True,
                           "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
    "initContainerStatuses": [], "ephemeralContainerStatuses": [],
}
NODE_STATUS_EXTRAS = {
    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "node"}],
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    "nodeInfo": {"architecture": "amd64", "kubeletVersion": "v1.36.3", "kernelVersion": "6.1", "osImage": "Linux",
                 "containerRuntimeVersion": "containerd://2.0", "operatingSystem": "linux", "machineID": "m",
                 "systemUUID": "s", "bootID": "b", "kubeProxyVersion": ""},
    "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
    "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"],
    "volumesAttached": [{"name": "kubernetes.io/csi/ebs^vol-1", "devicePath": ""}],
    "config": {}, "runtimeHandlers": [{"name": "runc", "features": {"recursiveReadOnlyMounts": True}}],
    "features": {"supplementalGroupsPolicy": True},
}


def _pod_spec_extras(spec: dict[str, Any]) -> None:
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                for field, value in CONTAINER_EXTRAS.items():
                    container.setdefault(field, copy.deepcopy(value))
    if isinstance(spec.get("volumes", []), list):
        spec["volumes"] = [*(spec.get("volumes") or []), *copy.deepcopy(EXTRA_VOLUMES)]
    spec.setdefault("ephemeralContainers", [{"name": "debugger", "image": "busybox", "stdin": True}])


def enrich(kind: str, obj: Any) -> Any:
    """A deep copy of ``obj`` with a realistic value of every field the transform drops (never replacing one)."""
    if not isinstance(obj, dict):
        return obj
    full = copy.deepcopy(obj)
    meta = full.get("metadata")
    if isinstance(meta, dict):
        meta.setdefault("managedFields", copy.deepcopy(MANAGED_FIELDS))
        annotations = meta.setdefault("annotations", {})
        if isinstance(annotations, dict):
            annotations.setdefault(transform_module.LAST_APPLIED, json.dumps({"kind": kind, "metadata": {"name": "x"}}))
    spec = full.get("spec")
    status = full.get("status")
    if kind == "Pod" and isinstance(spec, dict):
        _pod_spec_extras(spec)
        if isinstance(status, dict):
            for field, value in POD_STATUS_EXTRAS.items():
                status.setdefault(field, copy.deepcopy(value))
    elif kind == "DaemonSet" and isinstance(spec, dict):
        template_spec = (spec.get("template") or {}).get("spec")
        if isinstance(template_spec, dict):
            _pod_spec_extras(template_spec)
    elif kind == "Node" and isinstance(status, dict):
        for field, value in NODE_STATUS_EXTRAS.items():
            status.setdefault(field, copy.deepcopy(value))
    return full


class Reads:
    """The paths read of one cached object (thread-safe: informers, workers and round threads read)."""

    def __init__(self, kind: str, full: Any, kept: Any) -> None:
        self.kind = kind
        self.full = full
        self.kept = kept
        self.paths: set[Path_] = set()
        self.lock = threading.Lock()

    def add(self, path: Path_) -> None:
        with self.lock:
            self.paths.add(path)


def wrap(value: Any, path: Path_, reads: Reads) -> Any:
    if isinstance(value, dict):
        return RecordingDict(value, path, reads)
    if isinstance(value, list):
        return RecordingList(value, path, reads)
    return value


class RecordingDict(dict[Any, Any]):
    """A dict that records the keys asked for (see the module docstring); its children record too."""

    def __init__(self, data: Any = (), path: Path_ = (), reads: Reads | None = None) -> None:
        self._path = path
        self._reads = reads
        super().__init__({k: wrap(v, (*path, k), reads) for k, v in dict(data).items()} if reads else data)

    def _read(self, key: Any) -> None:
        if self._reads is not None:
            self._reads.add((*self._path, key))

    def __getitem__(self, key: Any) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return super().__contains__(key)

    def items(self) -> Any:
        for key in super().keys():
            self._read(key)
        return super().items()

    def values(self) -> Any:
        for key in super().keys():
            self._read(key)
        return super().values()

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in super().items()}

    def __reduce__(self) -> Any:
        return (dict, (dict(super().items()),))


class RecordingList(list[Any]):
    """A list that records the indexes read (by index or by iteration); its children record too."""

    def __init__(self, data: Any = (), path: Path_ = (), reads: Reads | None = None) -> None:
        self._path = path
        self._reads = reads
        super().__init__([wrap(v, (*path, i), reads) for i, v in enumerate(data)] if reads else data)

    def __getitem__(self, index: Any) -> Any:
        if self._reads is not None and isinstance(index, int):
            self._reads.add((*self._path, index if index >= 0 else len(self) + index))
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Any]:
        for i, value in enumerate(super().__iter__()):
            if self._reads is not None:
                self._reads.add((*self._path, i))
            yield value

    def __copy__(self) -> list[Any]:
        return list(super().__iter__())

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in super().__iter__()]

    def __reduce__(self) -> Any:
        return (list, (list(super().__iter__()),))


_MISSING = object()


def _at(obj: Any, path: Path_) -> Any:
    for key in path:
        if isinstance(obj, dict) and not isinstance(key, int):
            obj = dict.get(obj, key, _MISSING)
        elif isinstance(obj, list) and isinstance(key, int) and 0 <= key < list.__len__(obj):
            obj = list.__getitem__(obj, key)
        else:
            return _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def _plain(value: Any) -> Any:
    return copy.deepcopy(value)


def violations(records: list[Reads]) -> list[dict[str, str]]:
    """Every recorded path present in the enriched object that the stripped object lost or changed."""
    found: dict[tuple[str, str], str] = {}
    for record in records:
        with record.lock:
            paths = sorted(record.paths, key=repr)
        for path in paths:
            before = _at(record.full, path)
            if before is _MISSING:
                continue
            after = _at(record.kept, path)
            generic = ".".join("*" if isinstance(k, int) else str(k) for k in path)
            if after is _MISSING:
                found.setdefault((record.kind, generic), "read, but dropped by the transform")
            elif isinstance(before, list) and len(before) != list.__len__(after):
                found.setdefault((record.kind, generic), f"read, but {len(before)} items became {list.__len__(after)}")
            elif not isinstance(before, dict | list) and _plain(after) != before:
                found.setdefault((record.kind, generic), f"read, but {before!r} became {after!r}")
    return [{"kind": kind, "path": path, "problem": problem} for (kind, path), problem in sorted(found.items())]


class Recorder:
    """The transform the cache uses during the run: enrich, strip, record."""

    def __init__(self) -> None:
        self.records: list[Reads] = []
        self.lock = threading.Lock()
        self.strip = transform_module.strip

    def __call__(self, kind: str, obj: Any) -> Any:
        full = enrich(kind, obj)
        kept = self.strip(kind, copy.deepcopy(full))
        reads = Reads(kind, full, copy.deepcopy(kept))
        with self.lock:
            self.records.append(reads)
        return wrap(kept, (), reads)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-reads", default=None, help="write the transform's violations (JSON) to this file")


_recorder: Recorder | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _recorder
    if config.getoption("--record-reads"):
        _recorder = Recorder()
        cluster_module.strip = _recorder  # every ClusterState's default transform from now on


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("--record-reads")
    if target and _recorder is not None:
        Path(target).write_text(json.dumps({"objects": len(_recorder.records), "violations": violations(_recorder.records)}))
