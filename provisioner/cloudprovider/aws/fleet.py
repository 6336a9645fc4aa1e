"""CreateFleet requests built as plain values, and answers parsed into per-offering results.

Why pure: the request is where the launch decisions show (which overrides, which allocation
strategy, which tags, which idempotency token), so it is built by a function tests can check
exactly without any server, and the provider only sends it.

Shape (EC2 API reference, CreateFleet): ``Type=instant``, ``TotalTargetCapacity=1``,
``DefaultTargetCapacityType`` = the chosen capacity type, spot with
``price-capacity-optimized`` (Karpenter v0.19+; v0.6.3 used capacity-optimized-prioritized),
on-demand with ``lowest-price``; one ``LaunchTemplateConfigs`` entry per launch template, its
overrides = instance type x zone with one subnet per zone; ``TagSpecifications`` for the
instance, its volumes and the fleet. The answer's ``Errors`` are per override
(``LaunchTemplateAndOverrides.Overrides`` + ``Lifecycle`` + ``ErrorCode``), ``Instances`` lists
what was launched with its override.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.model import labels as wk

#: Most overrides one CreateFleet takes across its launch templates (EC2 API reference,
#: FleetLaunchTemplateConfigRequest: 300 for request/maintain fleets; applied to instant too).
MAX_OVERRIDES = 300


@dataclass(frozen=True, slots=True)
class Override:
    """One (instance type, zone, subnet) a fleet may launch, under a launch template."""

    launch_template: str
    instance_type: str
    zone: str
    subnet_id: str


@dataclass(frozen=True, slots=True)
class FleetInstance:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str


@dataclass(frozen=True, slots=True)
class FleetError:
    """A per-override failure; ``instance_type``/``zone`` may be empty when EC2 omits the override."""

    instance_type: str
    zone: str
    capacity_type: str
    code: str
    message: str

    @property
    def offering(self) -> tuple[str, str, str]:
        return (self.instance_type, self.zone, self.capacity_type)


@dataclass(frozen=True, slots=True)
class FleetResult:
    fleet_id: str
    instances: tuple[FleetInstance, ...]
    errors: tuple[FleetError, ...]


def client_token(
    request_id: str, capacity_type: str, overrides: Sequence[Override], spent: Sequence[str] = ()
) -> str:
    """A CreateFleet ``ClientToken`` (<= 64 ASCII chars) from the node request and the exact overrides.

    The same request retried with the same overrides gets the same token, so EC2 returns the
    first answer instead of launching again; a retry with different overrides (after
    insufficient capacity shrank them) gets a new token, since EC2 would otherwise reject it
    with IdempotentParameterMismatch. The live-instance tag look-up guards that case.
    ``spent``: the instance IDs earlier tokens of this request returned that are terminated now
    (EC2 answers a token with its first instance even after that instance is gone), oldest
    first; each gives a new token, the same on every retry.
    """
    material = json.dumps(
        [
            request_id,
            capacity_type,
            sorted((o.launch_template, o.instance_type, o.zone, o.subnet_id) for o in overrides),
            *([list(spent)] if spent else []),
        ],
        separators=(",", ":"),
    )
    return "groupless-" + hashlib.sha256(material.encode()).hexdigest()[:48]


def build_create_fleet_input(
    request_id: str,
    capacity_type: str,
    overrides: Sequence[Override],
    tags: Mapping[str, str],
    spent: Sequence[str] = (),
) -> dict[str, Any]:
    """The keyword arguments of ``ec2.create_fleet`` for one node.

    ``overrides`` in preference order (cheapest first), the first :data:`MAX_OVERRIDES` kept;
    templates keep the order of their first override. ``tags`` go on the instance, its volumes
    and the fleet. ``spent``: see :func:`client_token`.
    """
    overrides = list(overrides)[:MAX_OVERRIDES]
    by_template: dict[str, list[dict[str, str]]] = {}
    for o in overrides:
        by_template.setdefault(o.launch_template, []).append(
            {"InstanceType": o.instance_type, "SubnetId": o.subnet_id, "AvailabilityZone": o.zone}
        )
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    request: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": client_token(request_id, capacity_type, overrides, spent),
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": items,
            }
            for name, items in by_template.items()
        ],
        "TagSpecifications": [
            {"ResourceType": resource, "Tags": tag_list} for resource in ("instance", "volume", "fleet")
        ],
    }
    if capacity_type == wk.CAPACITY_TYPE_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    return request


def _override_fields(item: Mapping[str, Any]) -> tuple[str, str]:
    overrides = item.get("LaunchTemplateAndOverrides", {}).get("Overrides", {}) or {}
    return str(overrides.get("InstanceType", item.get("InstanceType", ""))), str(
        overrides.get("AvailabilityZone", "")
    )


def parse_create_fleet_output(
    response: Mapping[str, Any], capacity_type: str, subnet_zones: Mapping[str, str]
) -> FleetResult:
    """Instances and per-override errors of a CreateFleet answer.

    ``subnet_zones`` maps subnet ID -> zone, for answers whose overrides name only the subnet.
    """

    def zone_of(item: Mapping[str, Any]) -> str:
        instance_type, zone = _override_fields(item)
        del instance_type
        if zone:
            return zone
        subnet = (item.get("LaunchTemplateAndOverrides", {}).get("Overrides", {}) or {}).get("SubnetId", "")
        return subnet_zones.get(str(subnet), "")

    instances = []
    for item in response.get("Instances", []) or []:
        instance_type, _ = _override_fields(item)
        lifecycle = str(item.get("Lifecycle", capacity_type))
        for instance_id in item.get("InstanceIds", []) or []:
            instances.append(FleetInstance(str(instance_id), instance_type, zone_of(item), lifecycle))
    errors = []
    for item in response.get("Errors", []) or []:
        instance_type, _ = _override_fields(item)
        errors.append(
            FleetError(
                instance_type=instance_type,
                zone=zone_of(item),
                capacity_type=str(item.get("Lifecycle", capacity_type)),
                code=str(item.get("ErrorCode", "")),
                message=str(item.get("ErrorMessage", "")),
            )
        )
    return FleetResult(str(response.get("FleetId", "")), tuple(instances), tuple(errors))
