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
