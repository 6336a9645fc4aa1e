"""Node manifests as kubelet and the provisioning controller leave them."""

from __future__ import annotations

from typing import Any

from provisioner.model.labels import PROVISIONER_NAME


def node_manifest(name: str, *, provisioner: str | None = None, labels: dict[str, str] | None = None,
                  allocatable: dict[str, str] | None = None, kind: bool = False,
                  taints: list[dict[str, str]] | None = None, ready: bool = False) -> dict[str, Any]:
    """A Node named ``name`` with ``status.allocatable`` (quantities as strings; cpu 4, 16Gi, 110 pods by default).

    ``provisioner`` adds the ``karpenter.sh/provisioner-name`` label (a node Groupless manages);
    ``kind`` adds ``"kind": "Node"`` for code that tells objects apart by kind; ``taints`` go to
    ``spec.taints`` (``{"key", "value", "effect"}``); ``ready`` adds the ``Ready=True`` condition
    kubelet reports (without it a managed node is still launching).
    """
    all_labels = {PROVISIONER_NAME: provisioner} if provisioner else {}
    all_labels.update(labels or {})
    node: dict[str, Any] = {"metadata": {"name": name, "labels": all_labels},
                            "status": {"allocatable": allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}}}
    if taints:
        node["spec"] = {"taints": taints}
    if ready:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"kind": "Node", **node} if kind else node


#: The taints of a Node the controller has just created: Groupless' startup taint, and the one
#: kube-apiserver adds to a Node without a Ready condition (admission plugin TaintNodesByCondition).
STARTING_TAINTS = (
    {"key": "karpenter.sh/not-ready", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
)


def as_starting(node: dict[str, Any], *, ready: bool = False,
                taints: tuple[dict[str, str], ...] = STARTING_TAINTS) -> dict[str, Any]:
    """``node`` (a full v1.Node dict, changed in place and returned) while it starts.

    ``taints`` are added to ``spec.taints``; the ``Ready`` condition becomes ``ready`` (False: the
    kubelet has not reported yet). A Node with ``ready=True`` and some of :data:`STARTING_TAINTS`
    is the moment between the kubelet's report and the controllers removing them.
    """
    spec = node.setdefault("spec", {})
    spec["taints"] = [*(spec.get("taints") or []), *(dict(t) for t in taints)]
    status = node.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
    conditions.append({"type": "Ready", "status": "True" if ready else "False",
                       "reason": "KubeletReady" if ready else "KubeletNotReady"})
    status["conditions"] = conditions
    return node
