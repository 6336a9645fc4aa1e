"""The Node object created for a launched instance, before its kubelet registers.

Creating the Node right after the launch (Karpenter v0.6.3 does the same) makes the capacity
visible at once: kube-scheduler and our extender see the node, its taints keep pods away until
it is Ready (``karpenter.sh/not-ready:NoSchedule``), the finalizer ``karpenter.sh/termination``
guarantees the instance is terminated when the Node is deleted, and the ownerReference ties it
to its Provisioner. When the kubelet registers, it finds the Node and keeps these fields.

Capacity and allocatable are written in the wire form kubelet uses (cpu in cores or ``m``,
memory with binary suffixes: :func:`provisioner.model.quantity.format_quantity`), from the
instance type, so the cluster sees the right size before kubelet reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provisioner.api.types import Provisioner
from provisioner.cloudprovider.types import Machine, NodeRequest
from provisioner.model import labels as wk
from provisioner.model.quantity import to_wire_resource_list
from provisioner.model.taints import Taint
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.provisioners import provisioner_node_labels
from provisioner.scheduling.solver import PlannedNode


def node_request_id(
    provisioner: Provisioner, pod_uids: Iterable[str], attempt: int = 0, salt: str = ""
) -> str:
    """The stable id of a node request: the same Provisioner and pods give the same id.

    It becomes the CreateFleet ``ClientToken`` and the ``groupless.dev/node-request`` tag, so a
    launch retried (after a crash, or a timeout) returns the instance already launched instead
    of a second one. ``attempt`` distinguishes a deliberate retry with other offerings (after
    insufficient capacity), whose parameters differ and must not reuse the token; ``salt``
    a different purpose for the same pods (replacement capacity for a node being expired).
    """
    digest = hashlib.sha256()
    digest.update((provisioner.uid or provisioner.name).encode())
    for uid in sorted(set(pod_uids)):
        digest.update(b"\0" + uid.encode())
    if attempt:
        digest.update(f"\0attempt={attempt}".encode())
    if salt:
        digest.update(f"\0salt={salt}".encode())
    return "nr-" + digest.hexdigest()[:32]


def taint_dicts(taints: Iterable[Taint]) -> list[dict[str, str]]:
    """Wire-form taints, first occurrence of each (key, effect) kept, in order."""
    seen: set[tuple[str, str]] = set()
    result = []
    for taint in taints:
        if (taint.key, taint.effect) in seen:
            continue
        seen.add((taint.key, taint.effect))
        result.append(taint.to_dict())
    return result


def node_taints(provisioner: Provisioner, planned: Sequence[Taint] = ()) -> list[dict[str, str]]:
    """Provisioner taints (and the plan's), startup taints, then ``karpenter.sh/not-ready:NoSchedule``."""
    return taint_dicts(
        [
            *provisioner.spec.taints,
            *planned,
            *provisioner.spec.startup_taints,
            Taint(wk.NOT_READY_TAINT_KEY, "NoSchedule"),
        ]
    )


def node_labels(
    provisioner: Provisioner,
    machine: Machine,
    instance_type: InstanceType | None,
    planned_labels: Mapping[str, str],
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The plan's labels, then the Provisioner's, then the instance's.

    The Provisioner's: :func:`~provisioner.scheduling.provisioners.provisioner_node_labels` (its
    labels, ``provisioner-name`` and the settings' ``extra`` on keys it does not name). The
    instance's facts (zone, instance type, arch, os, capacity type, its type's labels) win over
    the plan's; ``kubernetes.io/hostname`` is the machine's name.
    """
    labels: dict[str, str] = dict(planned_labels)
    labels.update(provisioner_node_labels(provisioner, extra))
    if instance_type is not None:
        labels.update(
            {wk.INSTANCE_TYPE: instance_type.name, wk.ARCH: instance_type.arch, wk.OS: instance_type.os}
        )
        labels.update(dict(instance_type.labels))
    labels.update(
        {
            wk.INSTANCE_TYPE: machine.instance_type,
            wk.ZONE: machine.zone,
            wk.CAPACITY_TYPE: machine.capacity_type,
        }
    )
    labels.update(machine.labels)
    labels[wk.HOSTNAME] = machine.name
    return labels


def launched_price(machine: Machine, instance_type: InstanceType | None) -> float | None:
    """USD per hour of the offering ``machine`` runs on (its zone and capacity type), if known."""
    if instance_type is None:
        return None
    for offering in instance_type.offerings:
        if offering.zone == machine.zone and offering.capacity_type == machine.capacity_type:
            return offering.price
    return None


def node_manifest(
    *,
    provisioner: Provisioner,
    provisioner_uid: str,
    machine: Machine,
    instance_type: InstanceType | None,
    planned_labels: Mapping[str, str],
    planned_taints: Sequence[Taint],
    nominations: str | None,
    extra_labels: Mapping[str, str],
    extra_annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The Node object for ``machine`` (see the module docstring for each field).

    Annotations: the machine's (what its provider needs on the Node), then the settings' extras;
    ``groupless.dev/node-request`` names the node request it was launched for (its idempotency
    token), so a later round can tell its own launch from an earlier one for the same pods.
    """
    annotations = {**machine.annotations, **extra_annotations}
    if nominations is not None:
        annotations[wk.NOMINATIONS_ANNOTATION] = nominations
    price = launched_price(machine, instance_type)
    if price is not None:
        annotations[wk.PRICE_ANNOTATION] = f"{price:.6f}"
    if machine.launch_time:
        annotations[wk.LAUNCHED_AT_ANNOTATION] = machine.launch_time
    if machine.node_request_id:
        annotations[wk.NODE_REQUEST_TAG] = machine.node_request_id
    metadata: dict[str, Any] = {
        "name": machine.name,
        "labels": node_labels(provisioner, machine, instance_type, planned_labels, extra_labels),
        "annotations": annotations,
        "finalizers": [wk.TERMINATION_FINALIZER],
    }
    if provisioner_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": wk.API_VERSION,
                "kind": wk.KIND,
                "name": provisioner.name,
                "uid": provisioner_uid,
                "blockOwnerDeletion": True,
            }
        ]
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {"providerID": machine.provider_id, "taints": node_taints(provisioner, planned_taints)},
    }
    if instance_type is not None:
        node["status"] = {
            "capacity": to_wire_resource_list(instance_type.capacity),
            "allocatable": to_wire_resource_list(instance_type.allocatable),
        }
    return node


def node_request(
    provisioner: Provisioner,
    planned: PlannedNode,
    request_id: str,
    node_labels: Mapping[str, str],
    instance_type_options: Sequence[InstanceType] | None = None,
) -> NodeRequest:
    """The request that launches ``planned``, a node of ``provisioner``'s.

    Its requirements, and its instance type options unless the caller narrowed them
    (``instance_type_options``: those the Provisioner's limits still allow). Labels: the plan's,
    then the Provisioner's and the settings' ``node_labels``
    (:func:`provisioner.scheduling.provisioners.provisioner_node_labels`). Taints: the plan's,
    then the Provisioner's startup taints (they come off once the node is initialized).
    """
    labels = dict(planned.labels)
    labels.update(provisioner_node_labels(provisioner, node_labels))
    options = planned.instance_type_options if instance_type_options is None else instance_type_options
    return NodeRequest(
        id=request_id,
        provisioner=provisioner,
        instance_type_options=tuple(options),
        requirements=planned.requirements,
        labels=labels,
        taints=tuple(taint_dicts([*planned.taints, *provisioner.spec.startup_taints])),
    )
