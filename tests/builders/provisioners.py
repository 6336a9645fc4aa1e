"""Provisioners: the typed ``provisioner.api.types.Provisioner`` and ``karpenter.sh/v1alpha5`` manifests."""

from __future__ import annotations

from typing import Any

from provisioner.api.types import Limits, NodeSelectorRequirement, Provisioner, ProvisionerSpec, Taint

#: The walkthrough Provisioner's requirements (01-provisioner.yaml): spot or on-demand, arm64 or amd64.
WALKTHROUGH_REQUIREMENTS = (
    ("karpenter.sh/capacity-type", "In", ("spot", "on-demand")),
    ("kubernetes.io/arch", "In", ("arm64", "amd64")),
)


def provisioner(name="default", requirements=(), labels=(), taints=(), startup_taints=(), limits=None, weight=None):
    """A typed Provisioner: ``requirements`` as ``(key, operator, values)``, taints as ``Taint`` arguments,
    ``limits`` a mapping of resource name to quantity (``{"cpu": 8}``)."""
    return Provisioner(
        name=name,
        spec=ProvisionerSpec(
            requirements=tuple(NodeSelectorRequirement(k, o, tuple(v)) for k, o, v in requirements),
            labels=tuple(labels),
            taints=tuple(Taint(*t) for t in taints),
            startup_taints=tuple(Taint(*t) for t in startup_taints),
            limits=Limits(tuple(limits.items())) if limits else None,
            weight=weight,
        ),
    )


def provisioner_manifest(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A ``karpenter.sh/v1alpha5`` Provisioner object with ``spec`` as given (empty by default)."""
    return {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name}, "spec": spec}
