"""Pod manifests as the API server holds them, and the solver's ``Pod`` made from one."""

from __future__ import annotations

from typing import Any

from provisioner.scheduling.pods import pod_from_manifest


def unschedulable_status(message: str | None = None) -> dict[str, Any]:
    """The status kube-scheduler leaves on a pod no node fits: Pending, ``PodScheduled=False`` reason ``Unschedulable``.

    ``message`` (kube-scheduler's, e.g. ``"0/0 nodes are available"``) is left out when None.
    This condition is what the provisioning controller waits for before it launches for a pod.
    """
    condition: dict[str, Any] = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    if message is not None:
        condition["message"] = message
    return {"phase": "Pending", "conditions": [condition]}


def manifest(name, cpu="100m", memory=None, ns="default", labels=None, spec=None, uid=None, **extra: Any):
    """A v1 Pod with one container ``app`` requesting ``cpu`` (and ``memory``), uid ``uid-<name>`` by default.

    ``spec`` entries replace or add to the pod spec; ``extra`` adds top-level fields (``status``).
    """
    requests = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    body = {"containers": [{"name": "app", "image": "x", "resources": {"requests": requests}}]}
    body.update(spec or {})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "labels": labels or {}},
        "spec": body, **extra,
    }


def pod(name, **kw):
    """The solver's :class:`~provisioner.scheduling.pods.Pod` of :func:`manifest` ``(name, **kw)``."""
    return pod_from_manifest(manifest(name, **kw))
