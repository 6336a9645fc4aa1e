"""DaemonSets as the pods they will put on every node they tolerate.

A new node must have room for the DaemonSet pods that will land on it (DaemonSet overhead), so
the solver treats each DaemonSet's pod template as a :class:`~provisioner.scheduling.pods.Pod`
and counts it on a prospective node when the template tolerates the node's NoSchedule and
NoExecute taints and its node selector and required node affinity match the labels the node
will carry, as the DaemonSet controller and kube-scheduler decide
(:func:`provisioner.scheduling.solver.templates.daemonset_runs_on`; Karpenter's
``getDaemonOverhead`` only asks whether the requirements could be compatible, and misses a
DaemonSet requiring ``kubernetes.io/hostname`` or another label every node carries). The DaemonSet
controller adds default tolerations to every pod it creates (``node.kubernetes.io/not-ready``,
``unreachable``, ``disk-pressure``, ...); they are added here too so a template is judged as its
pods will be. Its pods go through admission, so
the namespace's LimitRange defaults size the template as they will size its pods: a DaemonSet
without requests in a namespace with a LimitRange reserves the defaults, not nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from provisioner.model import objects
from provisioner.scheduling.limitranges import LimitRangeError, apply_limit_range_defaults
from provisioner.scheduling.pods import Pod, Toleration, pod_from_manifest

#: Tolerations the DaemonSet controller adds to every daemon pod (pkg/controller/daemon/util).
DAEMONSET_DEFAULT_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", effect="NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", effect="NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", effect="NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", effect="NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", effect="NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),
)


def daemonset_pod(ds: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]] = ()) -> Pod:
    """The pod a DaemonSet would create: its ``spec.template`` with the DaemonSet's identity.

    ``limit_ranges``: LimitRange wire objects (any namespaces); those of the DaemonSet's
    namespace complete the template's requests as admission completes its pods'
    (:func:`~provisioner.scheduling.limitranges.apply_limit_range_defaults`).
    Raises ValueError naming the field (prefixed ``spec.template``) for a malformed template,
    :class:`~provisioner.scheduling.limitranges.LimitRangeError` naming a malformed LimitRange.
    """
    if not isinstance(ds, Mapping):
        raise ValueError(f"daemonset: expected an object, got {type(ds).__name__}")
    template = objects.spec(ds).get("template")
    if not isinstance(template, Mapping):
        raise ValueError("spec.template: required")
    tmeta = dict(objects.meta(template))
    tmeta.setdefault("namespace", objects.namespace(ds) or "default")
    tmeta["name"] = objects.name(ds)
    tmeta["uid"] = objects.uid(ds) or f"daemonset/{tmeta['namespace']}/{tmeta['name']}"
    tmeta["ownerReferences"] = [{"kind": "DaemonSet", "name": tmeta["name"], "controller": True}]
    try:
        admitted = apply_limit_range_defaults({"metadata": tmeta, "spec": template.get("spec") or {}}, limit_ranges)
        pod = pod_from_manifest(admitted)
    except LimitRangeError:
        raise
    except ValueError as error:
        raise ValueError(f"spec.template.{error}") from error
    return replace(pod, tolerations=pod.tolerations + DAEMONSET_DEFAULT_TOLERATIONS)
