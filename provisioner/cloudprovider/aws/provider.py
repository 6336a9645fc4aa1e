"""The CloudProvider on EC2 via boto3: instance types from EC2's catalog, launches through CreateFleet.

Why this shape: every decision (offering choice, launch template content, fleet request,
catalog conversion) lives in a pure module next to this one and is tested without AWS; this
class only fetches, caches and sends, and translates botocore errors into the typed errors of
:mod:`provisioner.cloudprovider.types` at the boundary (``raise ... from`` the botocore error).

Caches (all on the injected clock): subnets and security groups per selector (60 s), the
instance-type catalog (what the conversion reads of it) and zone offerings (5 min), the latest
converted instance types per (zones, node configuration), AMI parameters (5 min), launch template names
(for the process), the templates of instances it launched (while they live; template garbage
collection falls back on them where EC2 lacks the ``aws:ec2launchtemplate:id`` tag), and
offerings that failed with insufficient capacity (3 min).

Idempotency of ``create``: before launching, instances tagged
``groupless.dev/node-request=<id>`` (and owned by this cluster) that are pending or running are
looked up and returned; the CreateFleet ``ClientToken`` is derived from the request and its
overrides. moto ignores ClientToken, so the look-up is what the tests exercise.

Tags: every instance carries :func:`~provisioner.cloudprovider.launchrecord.launch_tags` (its
Provisioner, node request and launch record: what a restarted controller needs to write its
Node) and ``kubernetes.io/cluster/<cluster>=owned`` + ``groupless.dev/cluster=<cluster>``, which
:meth:`AWSCloudProvider.list` selects by.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from provisioner.api.types import AWSProvider, Provisioner
from provisioner.clock import Clock, RealClock, rfc3339
from provisioner.cloudprovider.aws.amifamily import MissingImage, family_of, variant_of
from provisioner.cloudprovider.aws.amis import AMIResolver, parameter_name
from provisioner.cloudprovider.aws.catalog import (
    LatestConversions,
    NodeConfiguration,
    catalog_fields,
    instance_types_for,
    offering_fields,
)
from provisioner.cloudprovider.aws.errors import UNFULFILLABLE_CAPACITY_CODES, is_throttling, translate
from provisioner.cloudprovider.aws.fleet import (
    FleetResult,
    Override,
    build_create_fleet_input,
    parse_create_fleet_output,
)
from provisioner.cloudprovider.aws.launchtemplates import (
    GROUPLESS_CLUSTER_TAG,
    LaunchTemplateConfig,
    LaunchTemplates,
    block_device_mappings,
    metadata_options,
)
from provisioner.cloudprovider.aws.pricing import PricingProvider, pricing_region
from provisioner.cloudprovider.aws.settings import AWSSettings
from provisioner.cloudprovider.aws.userdata import make_bootstrap, user_data
from provisioner.cloudprovider.launchrecord import launch_tags, read_launch_tags
from provisioner.cloudprovider.offerings import (
    UnavailableOfferings,
    candidates,
    cheapest_first,
    choose_capacity_type,
)
from provisioner.cloudprovider.types import (
    ConfigurationError,
    InstanceTypeList,
    InsufficientCapacityError,
    LaunchError,
    Machine,
    MachineList,
    NodeRequest,
    NotFoundError,
)
from provisioner.model import labels as wk

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Instance states that count as "this node exists".
LIVE_STATES = ("pending", "running", "stopping", "stopped")
#: Instance states of an instance that is going or gone.
GONE_STATES = ("shutting-down", "terminated")
#: How many terminated instances one create may get back from CreateFleet before it gives up.
MAX_SPENT_TOKENS = 3


class RawCatalog:
    """DescribeInstanceTypes + DescribeInstanceTypeOfferings answers and when they were fetched.

    Several providers of one account may share one (a catalog is ~1,400 types and ~2,000
    zone offerings per region, seconds to fetch); the provider refreshes it after its TTL.
    Items are kept as :func:`~provisioner.cloudprovider.aws.catalog.catalog_fields` and
    :func:`~provisioner.cloudprovider.aws.catalog.offering_fields` of EC2's answers (what the
    conversion reads), not as botocore parsed them.
    """

    def __init__(self) -> None:
        self.fetched_at: float | None = None
        self.types: list[dict[str, Any]] = []
        self.offerings: list[dict[str, Any]] = []
        self.lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Subnet:
    subnet_id: str
    zone: str
    available_ips: int


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """``(zone, instance id)`` of ``aws:///<zone>/<instance-id>``; NotFoundError when malformed."""
    prefix = "aws:///"
    if not provider_id.startswith(prefix):
        raise NotFoundError(f"provider ID {provider_id!r} is not an AWS provider ID (aws:///<zone>/<id>)")
    zone, _, instance_id = provider_id[len(prefix) :].partition("/")
    if not instance_id.startswith("i-"):
        raise NotFoundError(f"provider ID {provider_id!r} names no instance")
    return zone, instance_id


def selector_filters(selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """EC2 ``Filters`` for a tag selector: ``k: "*"`` -> ``tag-key=k``, ``k: v`` -> ``tag:k=v`` (v0.6.3)."""
    filters: list[dict[str, Any]] = []
    for key, value in sorted(selector.items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [v.strip() for v in value.split(",")]})
    return filters


#: Instance types named per DescribeInstanceTypes call (EC2's limit for ``InstanceTypes``). Types
#: are described by name, those offered in some zone only, a hundred at a time: one answer
#: for every type (moto ignores ``MaxResults``) is ~1,400 parsed items at once, and the
#: controller's heap kept the ~25 MiB that took after the items were dropped.
DESCRIBE_INSTANCE_TYPES_BATCH = 100

#: HTTP connections per AWS client (botocore's default is 10), above the launch parallelism.
MAX_POOL_CONNECTIONS = 32


class AWSCloudProvider:
    """CloudProvider over EC2/SSM/Pricing (see the module docstring).

    Build with :meth:`from_settings` (clients from a boto3 session, ``endpoint_url`` honoured),
    or pass clients directly (tests pass Stubber-wrapped ones). Call :meth:`start` to refresh
    prices in the background.
    """

    def __init__(
        self,
        settings: AWSSettings,
        ec2: Any,
        ssm: Any,
        pricing: Any | None = None,
        clock: Clock | None = None,
        catalog: RawCatalog | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or RealClock()
        self._ec2 = ec2
        self.unavailable = UnavailableOfferings(self.clock)
        self.amis = AMIResolver(ssm, self.clock)
        self.launch_templates = LaunchTemplates(ec2, self.clock)
        self.pricing = PricingProvider(
            settings.region,
            ec2,
            pricing if settings.pricing_api else None,
            self.clock,
            settings.pricing_file,
            settings.on_demand_refresh_interval,
            settings.spot_refresh_interval,
        )
        self._lock = threading.Lock()
        self._selected: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, list[dict[str, Any]]]] = {}
        self.catalog = catalog or RawCatalog()
        self._converted = LatestConversions()
        # Provisioner name -> the instance types its last listing left out for lack of an image
        self._missing_images: dict[str, tuple[MissingImage, ...]] = {}
        # instance ID -> (launch template names, clock.monotonic() when launched): which generated
        # templates this process's launches use, for delete_unused_launch_templates when instances
        # lack EC2's aws:ec2launchtemplate:id tag (moto's CreateFleet never sets it).
        self._launched_from: dict[str, tuple[frozenset[str], float]] = {}

    @classmethod
    def from_settings(
        cls, settings: AWSSettings, session: boto3.session.Session | None = None, clock: Clock | None = None
    ) -> AWSCloudProvider:
        """Clients from ``session`` (default: a new one) in ``settings.region``, retries in standard mode."""
        session = session or boto3.session.Session()
        # botocore retries a transient or throttling error at most twice after the first attempt
        # (``max_attempts`` counts retries); throttling that outlasts them is retried by _call on
        # the injected clock.
        # The provisioning controller launches up to 16 nodes at once, each with several EC2
        # calls: botocore's default pool of 10 connections would be discarded and reopened
        # ("Connection pool is full") under every burst.
        config = Config(
            retries={"max_attempts": 2, "mode": "standard"},
            user_agent_extra="groupless",
            max_pool_connections=MAX_POOL_CONNECTIONS,
        )
        kwargs: dict[str, Any] = {"region_name": settings.region, "config": config}
        if settings.endpoint_url:
            kwargs["endpoint_url"] = settings.endpoint_url
        ec2 = session.client("ec2", **kwargs)
        ssm = session.client("ssm", **kwargs)
        pricing = None
        if settings.uses_pricing_api:
            # the Pricing API's own endpoint: never the EC2/SSM override
            pricing_kwargs: dict[str, Any] = {"region_name": pricing_region(settings.region), "config": config}
            if settings.pricing_endpoint_url:
                pricing_kwargs["endpoint_url"] = settings.pricing_endpoint_url
            pricing = session.client("pricing", **pricing_kwargs)
        elif settings.pricing_api:
            log.info("EC2 endpoint override %s set without a Pricing API endpoint (--aws-pricing-endpoint-url): "
                     "not calling the Pricing API; on-demand prices come from the static table",
                     settings.endpoint_url)
        return cls(settings, ec2, ssm, pricing, clock)

    def start(self) -> None:
        """Start the background price refresh."""
        self.pricing.start()

    def stop(self) -> None:
        self.pricing.stop()

    # ------------------------------------------------------------------ helpers
    def _call(self, action: str, fn: Callable[[], T], attempts: int = 4) -> T:
        """``fn()`` retried on throttling with exponential backoff (0.5 s .. 8 s on the clock).

        Raises the translated typed error from the last botocore error.
        """
        retrying = Retrying(
            retry=retry_if_exception(is_throttling),
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=0.5, max=8),
            sleep=self.clock.sleep,
            reraise=True,
        )
        try:
            return retrying(fn)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, action) from error
        except RetryError as error:  # pragma: no cover - reraise=True re-raises the last error
            raise LaunchError(f"{action}: {error}") from error

    def _provider(self, provisioner: Provisioner) -> AWSProvider:
        provider = provisioner.spec.provider
        if provider is None:
            raise ConfigurationError(f"provisioner {provisioner.name} has no spec.provider")
        return provider

    def _select(self, operation: str, result_key: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every item ``operation`` (describe_subnets / describe_security_groups) finds for a tag selector.

        Answers are cached per (operation, selector) for ``settings.subnets_ttl`` seconds.
        """
        key = (operation, tuple(sorted(selector.items())))
        now = self.clock.monotonic()
        with self._lock:
            cached = self._selected.get(key)
        if cached is not None and now - cached[0] < self.settings.subnets_ttl:
            return cached[1]

        def describe() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for page in self._ec2.get_paginator(operation).paginate(Filters=selector_filters(selector)):
                out.extend(page.get(result_key, []))
            return out

        items = self._call(operation.replace("_", " "), describe)
        with self._lock:
            self._selected[key] = (now, items)
        return items

    def subnets(self, provisioner: Provisioner) -> list[Subnet]:
        """Subnets the ``subnetSelector`` finds, by zone then most free addresses; ConfigurationError when none."""
        selector = self._provider(provisioner).subnet_selector_map
        if not selector:
            raise ConfigurationError(
                f"provisioner {provisioner.name}: spec.provider.subnetSelector is required"
            )
        subnets = sorted(
            (
                Subnet(s["SubnetId"], s["AvailabilityZone"], int(s.get("AvailableIpAddressCount", 0)))
                for s in self._select("describe_subnets", "Subnets", selector)
            ),
            key=lambda s: (s.zone, -s.available_ips, s.subnet_id),
        )
        if not subnets:
            raise ConfigurationError(f"no subnets matched selector {selector}")
        return subnets

    def security_groups(self, provisioner: Provisioner) -> list[str]:
        """IDs of every security group the ``securityGroupSelector`` finds (all are attached); ConfigurationError when none."""
        selector = self._provider(provisioner).security_group_selector_map
        if not selector:
            raise ConfigurationError(
                f"provisioner {provisioner.name}: spec.provider.securityGroupSelector is required without launchTemplate"
            )
        groups = sorted(
            {g["GroupId"] for g in self._select("describe_security_groups", "SecurityGroups", selector)}
        )
        if not groups:
            raise ConfigurationError(f"no security groups exist given constraints {selector}")
        return groups

    def _raw_catalog(self) -> tuple[float, list[dict[str, Any]], list[dict[str, Any]]]:
        catalog = self.catalog
        with catalog.lock:  # one fetch at a time; others wait for its answer
            now = self.clock.monotonic()
            if catalog.fetched_at is not None and now - catalog.fetched_at < self.settings.instance_types_ttl:
                return catalog.fetched_at, catalog.types, catalog.offerings

            def describe_offerings() -> list[dict[str, Any]]:
                out: list[dict[str, Any]] = []
                paginator = self._ec2.get_paginator("describe_instance_type_offerings")
                for page in paginator.paginate(LocationType="availability-zone"):
                    out.extend(offering_fields(item) for item in page.get("InstanceTypeOfferings", []))
                return out

            def describe_types(names: list[str]) -> list[dict[str, Any]]:
                out: list[dict[str, Any]] = []
                paginator = self._ec2.get_paginator("describe_instance_types")
                for start in range(0, len(names), DESCRIBE_INSTANCE_TYPES_BATCH):
                    batch = names[start : start + DESCRIBE_INSTANCE_TYPES_BATCH]
                    for page in paginator.paginate(InstanceTypes=batch):
                        out.extend(catalog_fields(item) for item in page.get("InstanceTypes", []))
                return out

            offerings = self._call("describing instance type offerings", describe_offerings)
            names = sorted({str(item["InstanceType"]) for item in offerings if "InstanceType" in item})
            catalog.types = self._call("describing instance types", lambda: describe_types(names))
            catalog.offerings = offerings
            catalog.fetched_at = now
            return now, catalog.types, catalog.offerings

    # ------------------------------------------------------------------ protocol
    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        """Instance types offered in the zones of the Provisioner's subnets, priced, ICE-marked, sorted by name.

        The one conversion :func:`~provisioner.cloudprovider.aws.catalog.instance_types_for`
        under the Provisioner's :class:`~provisioner.cloudprovider.aws.catalog.NodeConfiguration`
        (disks, kubelet, ENI-limited pods, AMI family), as ``groupless plan`` and the kwok
        provider derive them; the types its ``amiFamily`` has no image for are left out, and
        why is in :meth:`missing_images` (logged when it changes).
        Raises ConfigurationError (no subnets, bad kubelet or volume quantities), LaunchError (EC2 failed).
        """
        zones = frozenset(s.zone for s in self.subnets(provisioner))
        fetched_at, types, offerings = self._raw_catalog()
        book = self.pricing.book()
        unavailable = self.unavailable.snapshot()
        try:
            config = NodeConfiguration.of(provisioner, self.settings.eni_limited_pod_density)
            cached = self._converted.get(
                (zones, config),
                (fetched_at, book, unavailable),
                lambda: instance_types_for(config, types, offerings, book, zones=zones, unavailable=unavailable),
            )
        except ValueError as error:
            raise ConfigurationError(f"provisioner {provisioner.name}: {error}") from error
        self._note_missing(provisioner, cached.missing_images)
        return list(cached.offered)

    def _note_missing(self, provisioner: Provisioner, missing: tuple[MissingImage, ...]) -> None:
        """Remember (and log when it changed) what the Provisioner's image family cannot boot."""
        with self._lock:
            changed = self._missing_images.get(provisioner.name, ()) != missing
            self._missing_images[provisioner.name] = missing
        if changed and missing:
            log.info("Provisioner %s: not offering %s", provisioner.name, "; ".join(str(m) for m in missing),
                     extra={"provisioner": provisioner.name})

    def missing_images(self, provisioner_name: str) -> tuple[MissingImage, ...]:
        """What the Provisioner's last :meth:`get_instance_types` left out for lack of an image (empty: nothing)."""
        with self._lock:
            return self._missing_images.get(provisioner_name, ())

    def create(self, request: NodeRequest) -> Machine:
        """Launch one instance for ``request`` through CreateFleet (see the module docstring).

        Raises InsufficientCapacityError (every override failed for capacity; the offerings
        are then unavailable for 3 minutes), ConfigurationError, LaunchError.
        """
        existing = self._find_by_request(request.id)
        if existing is not None:
            log.info(
                "Found instance %s already launched for node request %s", existing.instance_id, request.id
            )
            return existing
        provisioner = request.provisioner
        provider = self._provider(provisioner)
        options = list(request.instance_type_options)
        if not options:
            raise LaunchError(f"node request {request.id} has no instance type options")
        subnets = self.subnets(provisioner)
        subnet_by_zone: dict[str, Subnet] = {}
        for subnet in subnets:
            subnet_by_zone.setdefault(subnet.zone, subnet)
        capacity_type = choose_capacity_type(options, request.requirements, self.unavailable)
        chosen = [
            c
            for c in candidates(options, request.requirements, capacity_type, self.unavailable)
            if c.offering.zone in subnet_by_zone
        ]
        if not chosen:
            raise InsufficientCapacityError(
                f"no available {capacity_type} offering of [{', '.join(t.name for t in options)}] "
                "in the allowed zones with a subnet",
            )
        templates = self._launch_templates(
            request, provider, capacity_type, {c.instance_type.name for c in chosen}
        )
        overrides = [
            Override(
                launch_template=templates[c.instance_type.name],
                instance_type=c.instance_type.name,
                zone=c.offering.zone,
                subnet_id=subnet_by_zone[c.offering.zone].subnet_id,
            )
            for c in cheapest_first(chosen)
            if c.instance_type.name in templates
        ]
        machine = self._fleet(request, capacity_type, overrides, templates, {s.subnet_id: s.zone for s in subnets})
        launched_type = next((t for t in options if t.name == machine.instance_type), None)
        if launched_type is not None:  # the shape labels (karpenter.k8s.aws/instance-*) and arch, os
            implied = {wk.ARCH: launched_type.arch, wk.OS: launched_type.os, **dict(launched_type.labels)}
            machine = replace(machine, labels={**implied, **machine.labels})
        return machine

    def _fleet(self, request: NodeRequest, capacity_type: str, overrides: list[Override],
               templates: Mapping[str, str], subnet_zones: Mapping[str, str]) -> Machine:
        """CreateFleet for ``request`` and its described instance.

        An answer naming an instance that is already shutting down or terminated comes from a
        token an earlier launch of this request spent (its instance was terminated: its Node
        could not be written), since EC2 answers a ClientToken with its first instance even after
        that instance is gone; the launch is sent again with a token that names the spent
        instances (:func:`~provisioner.cloudprovider.aws.fleet.client_token`), at most
        :data:`MAX_SPENT_TOKENS` times.
        """
        tags = self._instance_tags(request)
        spent: list[str] = []
        while True:
            fleet_input = build_create_fleet_input(request.id, capacity_type, overrides, tags, spent)
            try:
                response = self._call("creating fleet", functools.partial(self._ec2.create_fleet, **fleet_input))
            except NotFoundError as error:  # a launch template was deleted behind our back
                self.launch_templates.forget()
                raise LaunchError(
                    f"creating fleet for node request {request.id}: {error}; retry re-creates it"
                ) from error
            instance = self._first_instance(request, parse_create_fleet_output(response, capacity_type, subnet_zones))
            self._record_launch(instance.instance_id, instance.instance_type, templates)
            machine = self._describe_launched(instance.instance_id, request)
            if machine is not None:
                return machine
            spent.append(instance.instance_id)
            if len(spent) > MAX_SPENT_TOKENS:
                raise LaunchError(f"creating fleet for node request {request.id} returned only terminated "
                                  f"instances: {', '.join(spent)}")
            log.info("CreateFleet answered node request %s with terminated instance %s (launched for it before); "
                     "launching with a new token", request.id, instance.instance_id)

    def delete(self, provider_id: str) -> None:
        """Terminate the instance; already gone (or not an AWS ID) is success. Raises LaunchError."""
        try:
            _, instance_id = parse_provider_id(provider_id)
        except NotFoundError:
            log.warning("Not terminating %s: not an AWS provider ID", provider_id)
            return
        try:
            self._call(
                "terminating instance", lambda: self._ec2.terminate_instances(InstanceIds=[instance_id])
            )
        except NotFoundError:
            return
        log.info("Terminated instance %s", instance_id)

    def get(self, provider_id: str) -> Machine:
        """The instance; NotFoundError when it does not exist or is terminated."""
        _, instance_id = parse_provider_id(provider_id)
        instance = self._describe(instance_id)
        if instance is None:
            raise NotFoundError(f"instance {instance_id} not found")
        if instance.get("State", {}).get("Name") == "terminated":
            raise NotFoundError(f"instance {instance_id} is terminated")
        return self.machine_from_instance(instance)

    def _describe(self, instance_id: str) -> Mapping[str, Any] | None:
        """The DescribeInstances item of ``instance_id``; None when EC2 does not know it (yet). Raises LaunchError."""
        try:
            response = self._call(
                f"describing instance {instance_id}",
                lambda: self._ec2.describe_instances(InstanceIds=[instance_id]),
            )
        except NotFoundError:
            return None
        for reservation in response.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                return dict(instance)
        return None

    def _live_instances(self) -> list[dict[str, Any]]:
        """Live instances tagged ``groupless.dev/cluster=<cluster>`` and owned by the cluster.

        Not only those with a Provisioner tag: an instance of ours without one is an orphan to
        terminate. Not every ``kubernetes.io/cluster/<cluster>=owned`` instance either: node
        groups of other tools carry that tag too.
        """
        filters = [
            {"Name": f"tag:kubernetes.io/cluster/{self.settings.cluster_name}", "Values": ["owned"]},
            {"Name": f"tag:{GROUPLESS_CLUSTER_TAG}", "Values": [self.settings.cluster_name]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]

        def describe() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for page in self._ec2.get_paginator("describe_instances").paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    out.extend(reservation.get("Instances", []))
            return out

        return self._call("listing instances", describe)

    def list(self) -> MachineList:
        """Live instances Groupless launched for this cluster (see ``_live_instances``), sorted by provider ID."""
        return sorted(
            (self.machine_from_instance(i) for i in self._live_instances()), key=lambda m: m.provider_id
        )

    def delete_unused_launch_templates(self, min_age_seconds: float = 3600.0) -> tuple[str, ...]:
        """Delete generated launch templates no live instance of this cluster uses (see LaunchTemplates.delete_unused).

        "In use" is a live instance's ``aws:ec2launchtemplate:id`` tag (EC2 sets it on instances
        launched from a template), or, for instances this process launched, the template recorded
        at launch: that covers EC2 implementations without the tag (moto's CreateFleet) and is
        forgotten once the instance is no longer live. Meant for the leader's garbage collection;
        returns the names deleted. Raises LaunchError when listing instances or templates fails.
        """
        started = self.clock.monotonic()
        live = self._live_instances()
        in_use = {
            tag["Value"]
            for instance in live
            for tag in instance.get("Tags", []) or []
            if tag.get("Key") == "aws:ec2launchtemplate:id"
        }
        live_ids = {str(instance.get("InstanceId", "")) for instance in live}
        with self._lock:
            # Forget launches whose instance is gone; keep ones newer than the listing (not visible yet).
            for instance_id in [
                i for i, (_, at) in self._launched_from.items() if i not in live_ids and at < started
            ]:
                del self._launched_from[instance_id]
            in_use_names = {
                name
                for instance_id, (names, _) in self._launched_from.items()
                if instance_id in live_ids
                for name in names
            }
        deleted = self.launch_templates.delete_unused(
            self.settings.cluster_name, in_use, min_age_seconds, in_use_names=in_use_names
        )
        for name in deleted:
            log.info("Deleted unused launch template %s", name)
        return tuple(deleted)

    # ------------------------------------------------------------------ launch internals
    def _record_launch(self, instance_id: str, instance_type: str, templates: Mapping[str, str]) -> None:
        """Remember the template(s) ``instance_id`` was launched from (all of the fleet's if its type is unknown)."""
        names = frozenset([templates[instance_type]] if instance_type in templates else templates.values())
        with self._lock:
            self._launched_from[instance_id] = (names, self.clock.monotonic())

    def _instance_tags(self, request: NodeRequest) -> dict[str, str]:
        provisioner = request.provisioner
        tags = {"Name": f"{wk.PROVISIONER_NAME}/{provisioner.name}"}
        if provisioner.spec.provider is not None:
            tags.update(provisioner.spec.provider.tags_map)  # user tags win over Name (v0.6.3)...
        # ...but not over the tags list(), the idempotency look-up, adoption and garbage collection rely on.
        tags.update(launch_tags(request))
        tags.update(
            {
                f"kubernetes.io/cluster/{self.settings.cluster_name}": "owned",
                GROUPLESS_CLUSTER_TAG: self.settings.cluster_name,
            }
        )
        return tags

    def _launch_templates(
        self, request: NodeRequest, provider: AWSProvider, capacity_type: str, names: set[str]
    ) -> dict[str, str]:
        """Instance type name -> launch template name, for every option that has an image.

        A user ``launchTemplate`` is used as is for all. ConfigurationError when no option
        has an image (naming the missing parameters) or settings are missing.
        """
        if provider.launch_template:
            return dict.fromkeys(names, provider.launch_template)
        settings = self.settings
        profile = provider.instance_profile or settings.default_instance_profile
        if not profile:
            raise ConfigurationError(
                "neither spec.provider.instanceProfile nor --aws-default-instance-profile is specified"
            )
        if not settings.cluster_ca_bundle:
            raise ConfigurationError(
                "no cluster CA bundle for node user data (a node could not trust the API server): set "
                "--cluster-ca-bundle (GROUPLESS_CLUSTER_CA_BUNDLE, chart value clusterCABundle), or run "
                "in-cluster or with a kubeconfig that has certificate-authority-data"
            )
        family = family_of(provider)
        security_groups = tuple(self.security_groups(request.provisioner))
        kubelet = request.provisioner.spec.kubelet_configuration
        max_pods = NodeConfiguration(kubelet=kubelet, eni_limited_pod_density=settings.eni_limited_pod_density
                                     ).kubelet_max_pods()
        labels = {**request.labels, wk.CAPACITY_TYPE: capacity_type}
        bootstrap = make_bootstrap(
            settings.cluster_name,
            settings.cluster_endpoint,
            settings.cluster_ca_bundle,
            settings.service_cidr,
            labels,
            request.taints,
            max_pods=max_pods,
            cluster_dns=settings.cluster_dns,
            kubelet=kubelet,
        )
        data = user_data(family, bootstrap)
        lt_tags = {
            f"kubernetes.io/cluster/{settings.cluster_name}": "owned",
            GROUPLESS_CLUSTER_TAG: settings.cluster_name,
            **provider.tags_map,
        }
        result: dict[str, str] = {}
        missing: list[str] = []
        by_type = {t.name: t for t in request.instance_type_options}
        for name in sorted(names):
            instance_type = by_type[name]
            parameter = parameter_name(
                family, instance_type.arch, variant_of(instance_type), settings.kubernetes_minor
            )
            try:
                image_id = self.amis.image_id(parameter)
            except ConfigurationError as error:
                missing.append(str(error))
                continue
            config = LaunchTemplateConfig(
                cluster_name=settings.cluster_name,
                image_id=image_id,
                security_group_ids=security_groups,
                user_data=data,
                instance_profile=profile,
                metadata_options=metadata_options(provider.metadata_options),
                block_device_mappings=block_device_mappings(provider.block_device_mappings, family),
                tags=tuple(sorted(lt_tags.items())),
            )
            result[name] = self.launch_templates.ensure(config, lt_tags)
        if not result:
            raise ConfigurationError("; ".join(sorted(set(missing))))
        if missing:
            log.warning(
                "Launching node request %s without %d option(s) that have no image: %s",
                request.id,
                len(names) - len(result),
                "; ".join(sorted(set(missing))),
            )
        return result

    def _first_instance(self, request: NodeRequest, result: FleetResult) -> Any:
        capacity_errors = [
            e for e in result.errors if e.code in UNFULFILLABLE_CAPACITY_CODES and e.instance_type
        ]
        self.unavailable.mark_all(e.offering for e in capacity_errors)
        if result.instances:
            if result.errors:
                log.info(
                    "Launched 1 instance for node request %s with fleet error(s) on other offerings: %s",
                    request.id,
                    "; ".join(
                        f"{e.instance_type}/{e.zone}/{e.capacity_type}: {e.code}" for e in result.errors
                    ),
                )
            return result.instances[0]
        described = "; ".join(
            f"{e.instance_type or '?'}/{e.zone or '?'}/{e.capacity_type}: {e.code} {e.message}".strip()
            for e in result.errors
        )
        if capacity_errors and len(capacity_errors) == len(result.errors):
            raise InsufficientCapacityError(
                f"insufficient capacity for node request {request.id}: {described}",
                sorted({e.offering for e in capacity_errors}),
            )
        raise LaunchError(
            f"creating fleet for node request {request.id} launched nothing: {described or 'no errors'}"
        )

    def _describe_launched(self, instance_id: str, request: NodeRequest) -> Machine | None:
        """DescribeInstances until the instance has a private DNS name (``describe_attempts`` tries).

        None when it is shutting down or terminated already: the answer was an earlier launch's.
        """
        last: Machine | None = None
        for attempt in range(max(1, self.settings.describe_attempts)):
            instance = self._describe(instance_id)  # None: eventual consistency, a new ID may not be visible yet
            if instance is not None and instance.get("State", {}).get("Name") in GONE_STATES:
                return None
            machine = self.machine_from_instance(instance) if instance is not None else None
            if machine is not None:
                last = machine
                if machine.name:
                    return machine
            if attempt + 1 < self.settings.describe_attempts:
                self.clock.sleep(self.settings.describe_interval)
        if last is not None:
            raise LaunchError(f"instance {instance_id} for node request {request.id} has no private DNS name")
        raise LaunchError(
            f"instance {instance_id} for node request {request.id} is not visible in DescribeInstances"
        )

    def _find_by_request(self, request_id: str) -> Machine | None:
        filters = [
            {"Name": f"tag:{wk.NODE_REQUEST_TAG}", "Values": [request_id]},
            {"Name": f"tag:kubernetes.io/cluster/{self.settings.cluster_name}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        response = self._call(
            "looking up instances of the node request", lambda: self._ec2.describe_instances(Filters=filters)
        )
        found = [i for r in response.get("Reservations", []) for i in r.get("Instances", [])]
        if not found:
            return None
        found.sort(key=lambda i: str(i.get("InstanceId")))
        return self.machine_from_instance(found[0])

    # ------------------------------------------------------------------ conversion
    @staticmethod
    def machine_from_instance(instance: Mapping[str, Any]) -> Machine:
        """A :class:`Machine` from a DescribeInstances ``Instances`` item."""
        instance_id = str(instance["InstanceId"])
        zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", []) or []}
        spot = instance.get("InstanceLifecycle") == "spot" or bool(instance.get("SpotInstanceRequestId"))
        capacity_type = wk.CAPACITY_TYPE_SPOT if spot else wk.CAPACITY_TYPE_ON_DEMAND
        arch = {"x86_64": "amd64", "arm64": "arm64"}.get(str(instance.get("Architecture", "")), "")
        labels = {
            wk.INSTANCE_TYPE: str(instance.get("InstanceType", "")),
            wk.ZONE: zone,
            wk.CAPACITY_TYPE: capacity_type,
            wk.OS: "linux",
        }
        if arch:
            labels[wk.ARCH] = arch
        launch_time = instance.get("LaunchTime")
        provisioner, request_id, record = read_launch_tags(tags)
        return Machine(
            provider_id=f"aws:///{zone}/{instance_id}",
            instance_id=instance_id,
            name=str(instance.get("PrivateDnsName", "") or "").lower(),
            instance_type=str(instance.get("InstanceType", "")),
            zone=zone,
            capacity_type=capacity_type,
            labels=labels,
            state=str(instance.get("State", {}).get("Name", "")),
            launch_time=rfc3339(launch_time.timestamp()) if isinstance(launch_time, datetime) else None,
            node_request_id=request_id,
            provisioner_name=provisioner,
            record=record,
        )


__all__ = ["AWSCloudProvider", "RawCatalog", "Subnet", "parse_provider_id", "selector_filters"]
