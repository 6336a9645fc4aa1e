"""Launch templates generated per distinct launch configuration, named by a hash, created once and reused.

Why generated templates: CreateFleet takes its AMI, security groups, user data, instance profile,
metadata options and disks from a launch template. One template per *distinct* configuration
(not per launch) keeps the count small and makes reuse safe: the name
``groupless/<cluster>/<hash>`` is a pure function of the configuration, so every controller
replica, restart and retry finds the same template, and a changed configuration (new AMI
release, new labels) gets a new name instead of mutating a template instances depend on.
Karpenter v0.6.3 did the same (``Karpenter-<cluster>-<hash>``).

Defaults (Karpenter v0.6.3): IMDS endpoint enabled, IPv6 endpoint disabled, hop limit 2,
IMDSv2 required; the family's default disks, gp3 and encrypted
(:func:`~provisioner.cloudprovider.aws.amifamily.default_block_devices`: a 20 GiB root volume,
``/dev/sda1`` on Ubuntu; for Bottlerocket a 4 GiB OS volume ``/dev/xvda`` plus a 20 GiB data
volume ``/dev/xvdb``, which is the pods' ephemeral storage).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from provisioner.api.types import BlockDeviceMapping, MetadataOptions
from provisioner.clock import Clock
from provisioner.cloudprovider.aws.amifamily import default_block_devices, volume_gib
from provisioner.cloudprovider.aws.errors import error_code, translate

LAUNCH_TEMPLATE_PREFIX = "groupless"
GROUPLESS_CLUSTER_TAG = "groupless.dev/cluster"


@dataclass(frozen=True, slots=True)
class LaunchTemplateConfig:
    """Everything a generated launch template holds. Equal configs share one template."""

    cluster_name: str
    image_id: str
    security_group_ids: tuple[str, ...]
    user_data: str
    instance_profile: str
    metadata_options: tuple[tuple[str, Any], ...]
    block_device_mappings: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    tags: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        """``groupless/<cluster>/<first 16 hex of sha256 over the canonical JSON>``."""
        canonical = json.dumps(
            {
                "image": self.image_id,
                "securityGroups": list(self.security_group_ids),
                "userData": self.user_data,
                "instanceProfile": self.instance_profile,
                "metadata": list(self.metadata_options),
                "blockDevices": [[d, list(e)] for d, e in self.block_device_mappings],
                "tags": list(self.tags),
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        digest = hashlib.sha256(f"{self.cluster_name}\n{canonical}".encode()).hexdigest()[:16]
        return f"{LAUNCH_TEMPLATE_PREFIX}/{self.cluster_name}/{digest}"

    def launch_template_data(self) -> dict[str, Any]:
        """The ``LaunchTemplateData`` of CreateLaunchTemplate."""
        profile = (
            {"Arn": self.instance_profile}
            if self.instance_profile.startswith("arn:")
            else {"Name": self.instance_profile}
        )
        return {
            "ImageId": self.image_id,
            "SecurityGroupIds": list(self.security_group_ids),
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "IamInstanceProfile": profile,
            "MetadataOptions": dict(self.metadata_options),
            "BlockDeviceMappings": [{"DeviceName": d, "Ebs": dict(e)} for d, e in self.block_device_mappings],
        }


def metadata_options(options: MetadataOptions | None) -> tuple[tuple[str, Any], ...]:
    """EC2 MetadataOptions: v0.6.3's defaults when the block is omitted, unset fields left to EC2."""
    if options is None:
        return (
            ("HttpEndpoint", "enabled"),
            ("HttpProtocolIpv6", "disabled"),
            ("HttpPutResponseHopLimit", 2),
            ("HttpTokens", "required"),
        )
    pairs: list[tuple[str, Any]] = []
    if options.http_endpoint is not None:
        pairs.append(("HttpEndpoint", options.http_endpoint))
    if options.http_protocol_ipv6 is not None:
        pairs.append(("HttpProtocolIpv6", options.http_protocol_ipv6))
    if options.http_put_response_hop_limit is not None:
        pairs.append(("HttpPutResponseHopLimit", options.http_put_response_hop_limit))
    if options.http_tokens is not None:
        pairs.append(("HttpTokens", options.http_tokens))
    return tuple(pairs)


#: EBS fields copied as they are: (our attribute, EC2's name). VolumeSize is converted to GiB.
_EBS_FIELDS = (
    ("volume_type", "VolumeType"),
    ("iops", "Iops"),
    ("throughput", "Throughput"),
    ("encrypted", "Encrypted"),
    ("kms_key_id", "KmsKeyId"),
    ("delete_on_termination", "DeleteOnTermination"),
    ("snapshot_id", "SnapshotId"),
)


def _ebs(volume_gib: int) -> tuple[tuple[str, Any], ...]:
    return (
        ("DeleteOnTermination", True),
        ("Encrypted", True),
        ("VolumeSize", volume_gib),
        ("VolumeType", "gp3"),
    )


def block_device_mappings(
    mappings: tuple[BlockDeviceMapping, ...] | None, ami_family: str
) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """EC2 BlockDeviceMappings from the Provisioner's, or the family's default disks.

    The defaults are :func:`~provisioner.cloudprovider.aws.amifamily.default_block_devices`.
    """
    if not mappings:
        return tuple((device, _ebs(gib)) for device, gib in default_block_devices(ami_family))
    result = []
    for mapping in mappings:
        ebs = mapping.ebs
        fields: dict[str, Any] = {}
        if ebs is not None:
            for attribute, ec2_name in _EBS_FIELDS:
                value = getattr(ebs, attribute)
                if value is not None:
                    fields[ec2_name] = value
            if ebs.volume_size is not None:
                fields["VolumeSize"] = volume_gib(ebs.volume_size)
        result.append((mapping.device_name, tuple(sorted(fields.items()))))
    return tuple(result)


class LaunchTemplates:
    """Ensures generated launch templates exist (describe, create on NotFound), remembering names it has seen.

    Also deletes generated templates nothing uses any more (:meth:`delete_unused`), as Karpenter
    v0.6.3 did: every new AMI release or label change makes a new template, and EC2 allows a
    limited number per region.
    """

    def __init__(self, ec2: Any, clock: Clock) -> None:
        self._ec2 = ec2
        self._clock = clock
        self._known: set[str] = set()
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def ensure(self, config: LaunchTemplateConfig, tags: Mapping[str, str]) -> str:
        """The template name for ``config``, created (tagged with ``tags``) if it does not exist.

        Raises ConfigurationError/LaunchError from the botocore error.
        """
        name = config.name
        with self._lock:
            self._used[name] = self._clock.monotonic()
            if name in self._known:
                return name
        try:
            self._ec2.describe_launch_templates(LaunchTemplateNames=[name])
        except ClientError as error:
            if error_code(error) not in (
                "InvalidLaunchTemplateName.NotFoundException",
                "InvalidLaunchTemplateId.NotFound",
            ):
                raise translate(error, f"describing launch template {name}") from error
            self._create(name, config, tags)
        except BotoCoreError as error:
            raise translate(error, f"describing launch template {name}") from error
        with self._lock:
            self._known.add(name)
        return name

    def _create(self, name: str, config: LaunchTemplateConfig, tags: Mapping[str, str]) -> None:
        try:
            self._ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=config.launch_template_data(),
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
                    }
                ],
            )
        except ClientError as error:
            if error_code(error) == "InvalidLaunchTemplateName.AlreadyExistsException":
                return  # another replica created it first: same name, same content
            raise translate(error, f"creating launch template {name}") from error
        except BotoCoreError as error:
            raise translate(error, f"creating launch template {name}") from error

    def forget(self) -> None:
        """Forget which templates exist (after one vanished: the next launch re-creates it)."""
        with self._lock:
            self._known.clear()

    def delete_unused(
        self,
        cluster_name: str,
        in_use_ids: set[str],
        min_age_seconds: float,
        in_use_names: Collection[str] = (),
    ) -> list[str]:
        """Delete this cluster's generated templates that nothing needs; the names deleted, sorted.

        A template is kept when a live instance was launched from it (``in_use_ids``: template
        IDs, from the ``aws:ec2launchtemplate:id`` tags EC2 puts on instances launched from a
        template; ``in_use_names``: template names, for instances whose launch the caller
        recorded itself, e.g. where that tag is missing), when it is younger than
        ``min_age_seconds`` (EC2's ``CreateTime`` against the clock's wall time), or when this
        process used it within ``min_age_seconds``. Raises LaunchError (from the botocore
        error) when listing fails; a template already gone is skipped.
        """
        prefix = f"{LAUNCH_TEMPLATE_PREFIX}/{cluster_name}/"
        now_wall = self._clock.now()
        now = self._clock.monotonic()
        try:
            templates = [
                t
                for page in self._ec2.get_paginator("describe_launch_templates").paginate(
                    Filters=[{"Name": f"tag:{GROUPLESS_CLUSTER_TAG}", "Values": [cluster_name]}]
                )
                for t in page.get("LaunchTemplates", [])
            ]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, "listing launch templates") from error
        deleted: list[str] = []
        for template in templates:
            name = str(template.get("LaunchTemplateName", ""))
            created = template.get("CreateTime")
            age = now_wall - created.timestamp() if isinstance(created, datetime) else 0.0
            with self._lock:
                used = self._used.get(name)
            if (
                not name.startswith(prefix)
                or template.get("LaunchTemplateId") in in_use_ids
                or name in in_use_names
                or age < min_age_seconds
                or (used is not None and now - used < min_age_seconds)
            ):
                continue
            try:
                self._ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
            except ClientError as error:
                if error_code(error) not in (
                    "InvalidLaunchTemplateId.NotFound",
                    "InvalidLaunchTemplateName.NotFoundException",
                ):
                    raise translate(error, f"deleting launch template {name}") from error
            with self._lock:
                self._known.discard(name)
                self._used.pop(name, None)
            deleted.append(name)
        return sorted(deleted)
