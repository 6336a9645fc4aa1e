"""A CloudProvider whose instances are Nodes that kwok runs: Groupless at any scale, without a cloud.

Why: the controller's own throughput (batching, solving, launching, Node writes, lifecycle)
should be measurable apart from the cloud behind it, and a user should be able to try Groupless
on thousands of nodes without an account. kwok (``sigs.k8s.io/kwok``) plays the kubelet of
every Node that carries its annotation ``kwok.x-k8s.io/node: fake``: it marks the Node Ready
and runs the pods bound to it. Karpenter ships the same idea as its ``kwok`` provider
(``kwok/cloudprovider/``); the facts carried over from it are the ``kwok://<node name>``
provider ID, the ``kwok.x-k8s.io/node: fake`` label and annotation, "the Node is the instance"
(delete deletes the Node, get reads it, a Node being deleted is gone, list is every Node with
the prefix) and the cheapest available offering.

State lives in the cluster, never in this process, so a restarted controller sees what was
launched: **an instance is a Node whose ``spec.providerID`` is ``kwok://<its name>``**.

- :meth:`KwokCloudProvider.create` chooses the capacity type and the offering exactly as the
  AWS provider does (:mod:`provisioner.cloudprovider.offerings`: spot when allowed and offered,
  then the cheapest allowed offering) and returns the Machine. It writes nothing itself: the
  provisioning controller creates the Node at once (``node_manifest``: labels, taints,
  finalizer, nominations) -- that Node *is* the launch. The Machine carries what makes the
  Node a kwok instance: the label and annotation ``kwok.x-k8s.io/node: fake`` (kwok's default
  selector is that annotation) and the label ``groupless.dev/node-request: <request id>``.
- The Node's name is derived from the request id (``kwok-`` + 16 hex digits of its SHA-256),
  so create is idempotent per ``request.id`` as the other providers are: a retried create
  finds the Node of the first one and returns it; before the Node exists it returns the same
  name again. A request whose Node is being deleted (its instance was terminated: the node
  went empty, or expired, and the pods it was launched for are pending again) launches under
  the next name of its chain (:func:`node_name` of the request id and the names spent), as
  the EC2 provider launches with a new ClientToken when the first one's instance is gone; a
  retried create walks the same chain and finds that Node. More than
  :data:`MAX_SPENT_NAMES` names being deleted raises LaunchError (retried later).
- :meth:`~KwokCloudProvider.get` reads the Node (NotFoundError when absent, being deleted, or
  not a kwok instance); :meth:`~KwokCloudProvider.list` lists the Nodes labelled
  ``karpenter.sh/provisioner-name`` with a ``kwok://`` provider ID, not being deleted;
  :meth:`~KwokCloudProvider.delete` deletes the Node (its ``karpenter.sh/termination``
  finalizer then sends it through the termination controller's PDB-respecting drain), and a
  Node already gone or being deleted is success.

Unlike a cloud there is no launched-but-untracked window to garbage-collect: a create whose
Node is never written (the controller crashed in between) launched nothing.

Instance types come from EC2-shaped catalog files (:mod:`provisioner.cloudprovider.catalogfiles`,
the reader ``groupless plan`` uses) converted by the AWS provider's own conversion
(:func:`provisioner.cloudprovider.aws.catalog.instance_types_for`: capacity, disks, kubelet
reservations, ENI-limited pods, the AMI family's rules and images, ``karpenter.k8s.aws/instance-*``
labels), so a kwok Node is the size the AWS provider would have launched. Without files, the default catalog shipped in
``provisioner/cloudprovider/data/`` is used: 42 types (22 amd64, 20 arm64; burstable, general,
compute, memory, GPU and Neuron families) in ap-south-1a/b/c with on-demand and spot prices.
Of the Provisioner's ``spec.provider`` only what sizes a node applies (``amiFamily``,
``blockDeviceMappings``); subnets, security groups and images are not looked up.

Insufficient capacity: offerings in :attr:`KwokCloudProvider.insufficient_capacity` fail as
EC2's InsufficientInstanceCapacity would (for tests and experiments that embed the provider);
a create whose every allowed offering fails raises InsufficientCapacityError naming them and
marks them unavailable for 3 minutes, so :meth:`~KwokCloudProvider.get_instance_types` reports
them ``available=False`` and the controller re-solves with the others.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.api.types import Provisioner
from provisioner.clock import Clock, RealClock, rfc3339
from provisioner.cloudprovider import catalogfiles
from provisioner.cloudprovider.aws.catalog import (
    LatestConversions,
    NodeConfiguration,
    PriceBook,
    instance_types_for,
)
from provisioner.cloudprovider.offerings import (
    OfferingKey,
    UnavailableOfferings,
    candidates,
    cheapest_first,
    choose_capacity_type,
    launch_labels,
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
from provisioner.kube.api import ApiError, KubeAPI, Object
from provisioner.kube.api import NotFoundError as KubeNotFoundError
from provisioner.model import labels as wk
from provisioner.scheduling.instancetypes import InstanceType, Offering

if TYPE_CHECKING:
    from provisioner.settings import ControllerSettings

log = logging.getLogger(__name__)

#: Provider IDs of kwok instances: ``kwok://<node name>`` (Karpenter's kwok provider's form).
PROVIDER_ID_PREFIX = "kwok://"
#: The label and annotation kwok selects the Nodes it simulates by (kwok's default selector is
#: the annotation; Karpenter's kwok provider sets both).
KWOK_NODE_KEY = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"

DATA_DIR = Path(__file__).resolve().parent / "data"
#: The default catalog (package data): DescribeInstanceTypes, offerings and prices.
DEFAULT_INSTANCE_TYPES = DATA_DIR / "kwok-instance-types.json"
DEFAULT_OFFERINGS = DATA_DIR / "kwok-offerings.json"
DEFAULT_PRICES = DATA_DIR / "kwok-prices.json"
#: The region of the default offerings; its prices apply whenever the catalog is in this region.
DEFAULT_REGION = "ap-south-1"

#: Node labels a Machine read back from a Node carries (those create() put there, plus the
#: instance type's shape labels).
_MACHINE_LABELS = frozenset(
    {wk.INSTANCE_TYPE, wk.ZONE, wk.CAPACITY_TYPE, wk.ARCH, wk.OS, KWOK_NODE_KEY, wk.NODE_REQUEST_TAG}
)
_SHAPE_LABEL_PREFIX = "karpenter.k8s.aws/"


@dataclass(frozen=True)
class KwokCatalog:
    """The simulated cloud's catalog: EC2 answers, their region and prices.

    ``instance_types`` are DescribeInstanceTypes items, ``offerings`` DescribeInstanceTypeOfferings
    items (availability zones of ``region``), ``prices`` the price book (USD per hour);
    ``source`` says which files they came from (for logs).
    """

    instance_types: Sequence[Mapping[str, Any]]
    offerings: Sequence[Mapping[str, Any]]
    region: str
    prices: PriceBook
    source: str

    @property
    def zones(self) -> list[str]:
        """The offerings' zones, sorted."""
        return sorted({str(o.get("Location", "")) for o in self.offerings})


def load_catalog(instance_types: str | Path | None = None, offerings: str | Path | None = None) -> KwokCatalog:
    """The catalog from files; each one left out is the default catalog's.

    ``instance_types``: a DescribeInstanceTypes answer; ``offerings``: a
    DescribeInstanceTypeOfferings (availability zones) answer whose zones are of one region.
    Prices: the static list-price table of that region (spot estimated from on-demand, types it
    lacks estimated from their shape, logged once), with the default catalog's prices over it
    when the region is ap-south-1. Raises CatalogFileError naming the file (unreadable, not JSON,
    the wrong shape, no offerings, zones of several regions).
    """
    types_path = Path(instance_types) if instance_types else DEFAULT_INSTANCE_TYPES
    offerings_path = Path(offerings) if offerings else DEFAULT_OFFERINGS
    types = catalogfiles.read_instance_types(types_path)
    zones = catalogfiles.read_offerings(offerings_path)
    if not zones:
        raise catalogfiles.CatalogFileError(f"{offerings_path}: no offerings: a kwok catalog needs at least one zone")
    try:
        region = catalogfiles.offerings_region(zones, offerings_path)
    except catalogfiles.CatalogFileError as error:
        raise catalogfiles.CatalogFileError(f"{error}: a kwok catalog's zones must be of one region") from error
    warnings: list[str] = []
    book = catalogfiles.price_book(DEFAULT_PRICES if region == DEFAULT_REGION else None, region, warnings)
    for warning in warnings:
        log.warning("kwok catalog: %s", warning)
    source = f"{types_path} and {offerings_path}"
    return KwokCatalog(instance_types=types, offerings=zones, region=region, prices=book, source=source)


#: Names of one node request's chain whose Nodes may still be being deleted before a create gives up.
MAX_SPENT_NAMES = 3


def node_name(request_id: str, spent: Sequence[str] = ()) -> str:
    """The Node name (and instance ID) of a node request's instance: ``kwok-`` + 16 hex digits.

    ``spent``: the names of the request's earlier instances whose Nodes are being deleted (see
    the module docstring); each gives the request a new name.
    """
    key = request_id if not spent else f"{request_id}\0spent={','.join(spent)}"
    return "kwok-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def provider_id_of(name: str) -> str:
    """``kwok://<name>``."""
    return PROVIDER_ID_PREFIX + name


def parse_provider_id(provider_id: str) -> str | None:
    """The Node name of ``kwok://<name>``; None for any other provider ID."""
    if not provider_id.startswith(PROVIDER_ID_PREFIX):
        return None
    name = provider_id[len(PROVIDER_ID_PREFIX) :]
    return name or None


def _metadata(node: Object) -> dict[str, Any]:
    value = node.get("metadata")
    return value if isinstance(value, dict) else {}


def _provider_id(node: Object) -> str:
    spec = node.get("spec")
    return str(spec.get("providerID") or "") if isinstance(spec, dict) else ""


def _labels(node: Object) -> dict[str, str]:
    value = _metadata(node).get("labels")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _is_deleting(node: Object) -> bool:
    return bool(_metadata(node).get("deletionTimestamp"))


def is_instance(node: Object) -> bool:
    """Whether ``node`` is a kwok instance: its provider ID is ``kwok://`` + its own name."""
    name = str(_metadata(node).get("name") or "")
    return bool(name) and _provider_id(node) == provider_id_of(name)


def machine_from_node(node: Object) -> Machine:
    """The Machine a kwok instance's Node stands for (labels: the well-known and shape labels it has)."""
    meta = _metadata(node)
    labels = _labels(node)
    name = str(meta.get("name") or "")
    created = meta.get("creationTimestamp")
    return Machine(
        provider_id=_provider_id(node),
        instance_id=name,
        name=name,
        instance_type=labels.get(wk.INSTANCE_TYPE, ""),
        zone=labels.get(wk.ZONE, ""),
        capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
        labels={k: v for k, v in labels.items() if k in _MACHINE_LABELS or k.startswith(_SHAPE_LABEL_PREFIX)},
        state="running",
        launch_time=str(created) if created else None,
        node_request_id=labels.get(wk.NODE_REQUEST_TAG),
        provisioner_name=labels.get(wk.PROVISIONER_NAME),
        annotations={KWOK_NODE_KEY: KWOK_NODE_VALUE},
    )


class KwokCloudProvider:
    """CloudProvider over the Kubernetes API and kwok (see the module docstring).

    ``kube``: the API the Nodes are read and deleted through (the controller's). ``catalog``:
    :func:`load_catalog`'s (default: the shipped one). ``eni_limited_pod_density``: pod capacity
    from ENI limits (False: 110), as ``--eni-limited-pod-density`` sets it for AWS.
    ``insufficient_capacity``: (instance type, zone, capacity type) offerings that fail as
    EC2's InsufficientInstanceCapacity would. Thread-safe: the controller launches in parallel.
    """

    #: The provisioning controller logs the "Launched instance: ..." line for this provider.
    logs_launches = False

    def __init__(
        self,
        kube: KubeAPI,
        catalog: KwokCatalog | None = None,
        clock: Clock | None = None,
        *,
        eni_limited_pod_density: bool = True,
        insufficient_capacity: Iterable[OfferingKey] = (),
    ) -> None:
        self.kube = kube
        self.catalog = catalog or load_catalog()
        self.clock: Clock = clock or RealClock()
        self.eni_limited_pod_density = eni_limited_pod_density
        self.insufficient_capacity: set[OfferingKey] = set(insufficient_capacity)
        self.unavailable = UnavailableOfferings(self.clock)
        self._converted = LatestConversions()

    @classmethod
    def from_settings(cls, settings: ControllerSettings, kube: KubeAPI, clock: Clock | None = None) -> KwokCloudProvider:
        """The provider of ``groupless controller --cloud-provider kwok`` (``--instance-types``, ``--offerings``).

        Raises CatalogFileError when a catalog file cannot be used.
        """
        catalog = load_catalog(settings.kwok.instance_types_file, settings.kwok.offerings_file)
        log.info(
            "kwok cloud provider: %d instance types in %s (%s) from %s; prices from %s",
            len(catalog.instance_types),
            catalog.region,
            ", ".join(catalog.zones),
            catalog.source,
            catalog.prices.source,
        )
        return cls(kube, catalog, clock, eni_limited_pod_density=settings.aws.eni_limited_pod_density)

    # ------------------------------------------------------------------ protocol
    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        """The catalog's types in every catalog zone, priced, ICE-marked, sorted by name.

        The AWS provider's own conversion
        (:func:`~provisioner.cloudprovider.aws.catalog.instance_types_for` under the
        Provisioner's :class:`~provisioner.cloudprovider.aws.catalog.NodeConfiguration`):
        ``kubeletConfiguration``, ``blockDeviceMappings`` and ``amiFamily`` size the nodes as on
        AWS, and types the family has no image for are not offered. ConfigurationError when a
        kubelet or volume quantity does not parse.
        """
        unavailable = self.unavailable.snapshot()
        try:
            config = NodeConfiguration.of(provisioner, self.eni_limited_pod_density)
            cached = self._converted.get(
                config,
                (unavailable,),
                lambda: instance_types_for(config, self.catalog.instance_types, self.catalog.offerings,
                                           self.catalog.prices, unavailable=unavailable),
            )
        except ValueError as error:
            raise ConfigurationError(f"provisioner {provisioner.name}: {error}") from error
        return list(cached.offered)

    def create(self, request: NodeRequest) -> Machine:
        """The instance of ``request``: its existing Node's, else a new choice of offering (see the module docstring).

        Raises InsufficientCapacityError (no allowed offering is available, or every one is in
        ``insufficient_capacity``), LaunchError (no options; the request's Node is still being
        deleted or is not a kwok instance; the API failed).
        """
        name, existing = self._request_node(request)
        if existing is not None:
            log.info("Found instance %s already launched for node request %s", name, request.id)
            return machine_from_node(existing)
        options = list(request.instance_type_options)
        if not options:
            raise LaunchError(f"node request {request.id} has no instance type options")
        capacity_type = choose_capacity_type(options, request.requirements, self.unavailable)
        tried = candidates(options, request.requirements, capacity_type, self.unavailable)
        if not tried:
            raise InsufficientCapacityError(
                f"no available {capacity_type} offering of [{', '.join(t.name for t in options)}] "
                "in the allowed zones",
            )
        failed: list[OfferingKey] = []
        for candidate in cheapest_first(tried):
            if candidate.key in self.insufficient_capacity:
                failed.append(candidate.key)
                continue
            self.unavailable.mark_all(failed)
            return self._machine(name, request, candidate.instance_type, candidate.offering)
        self.unavailable.mark_all(failed)
        raise InsufficientCapacityError(
            f"insufficient capacity for node request {request.id}: "
            + ", ".join(f"{t}/{z}/{c}" for t, z, c in sorted(failed)),
            sorted(failed),
        )

    def _request_node(self, request: NodeRequest) -> tuple[str, Object | None]:
        """The name of ``request``'s instance and its live Node (None when not launched yet).

        Walks the request's chain of names past Nodes being deleted (module docstring). Raises
        LaunchError when a name is taken by a Node that is not the request's kwok instance, or
        more than :data:`MAX_SPENT_NAMES` of the chain are being deleted.
        """
        spent: list[str] = []
        while True:
            name = node_name(request.id, spent)
            existing = self._read_node(name)
            if existing is None:
                return name, None
            if not is_instance(existing) or _labels(existing).get(wk.NODE_REQUEST_TAG) != request.id:
                raise LaunchError(
                    f"node {name} of node request {request.id} exists and is not its kwok instance "
                    f"(providerID {_provider_id(existing) or 'unset'})"
                )
            if not _is_deleting(existing):
                return name, existing
            spent.append(name)
            if len(spent) > MAX_SPENT_NAMES:
                raise LaunchError(
                    f"nodes {', '.join(spent)} of node request {request.id} are still being deleted; "
                    "retry once they are gone"
                )
            log.info("Node %s of node request %s is being deleted (its instance was terminated); "
                     "launching under a new name", name, request.id)

    def delete(self, provider_id: str) -> None:
        """Delete the instance's Node; gone, being deleted or not a kwok instance is success. Raises LaunchError."""
        name = parse_provider_id(provider_id)
        if name is None:
            log.warning("Not terminating %s: not a kwok provider ID (kwok://<node name>)", provider_id)
            return
        node = self._read_node(name)
        if node is None or _provider_id(node) != provider_id or _is_deleting(node):
            return
        try:
            self.kube.delete("Node", name)
        except KubeNotFoundError:
            return
        except ApiError as error:
            raise LaunchError(f"terminating instance {name}: deleting its node: {error}") from error
        log.info("Terminated instance %s (deleted its kwok node)", name)

    def get(self, provider_id: str) -> Machine:
        """The instance; NotFoundError when its Node is absent, being deleted or not a kwok instance."""
        name = parse_provider_id(provider_id)
        if name is None:
            raise NotFoundError(f"provider ID {provider_id!r} is not a kwok provider ID (kwok://<node name>)")
        node = self._read_node(name)
        if node is None:
            raise NotFoundError(f"instance {name} not found (no node {name})")
        if _provider_id(node) != provider_id:
            raise NotFoundError(f"instance {name} not found (node {name} has providerID {_provider_id(node)!r})")
        if _is_deleting(node):
            raise NotFoundError(f"instance {name} is terminated (its node is being deleted)")
        return machine_from_node(node)

    def list(self) -> MachineList:
        """Every kwok instance launched for a Provisioner and not being deleted, sorted by provider ID.

        Raises LaunchError when the API fails.
        """
        try:
            nodes, _ = self.kube.list("Node", label_selector=wk.PROVISIONER_NAME)
        except ApiError as error:
            raise LaunchError(f"listing kwok instances (nodes): {error}") from error
        return sorted(
            (machine_from_node(n) for n in nodes if is_instance(n) and not _is_deleting(n)),
            key=lambda m: m.provider_id,
        )

    # ------------------------------------------------------------------ internals
    def _read_node(self, name: str) -> Object | None:
        """The Node ``name`` or None; LaunchError when the API fails otherwise."""
        try:
            return self.kube.get("Node", name)
        except KubeNotFoundError:
            return None
        except ApiError as error:
            raise LaunchError(f"reading node {name}: {error}") from error

    def _machine(self, name: str, request: NodeRequest, instance_type: InstanceType, offering: Offering) -> Machine:
        labels = {
            **launch_labels(instance_type, offering),
            KWOK_NODE_KEY: KWOK_NODE_VALUE,
            wk.NODE_REQUEST_TAG: request.id,
        }
        return Machine(
            provider_id=provider_id_of(name),
            instance_id=name,
            name=name,
            instance_type=instance_type.name,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            labels=labels,
            state="running",
            launch_time=rfc3339(self.clock.now()),
            node_request_id=request.id,
            provisioner_name=request.provisioner.name,
            annotations={KWOK_NODE_KEY: KWOK_NODE_VALUE},
        )


__all__ = [
    "DEFAULT_INSTANCE_TYPES",
    "DEFAULT_OFFERINGS",
    "DEFAULT_PRICES",
    "KWOK_NODE_KEY",
    "KWOK_NODE_VALUE",
    "PROVIDER_ID_PREFIX",
    "KwokCatalog",
    "KwokCloudProvider",
    "is_instance",
    "load_catalog",
    "machine_from_node",
    "node_name",
    "parse_provider_id",
    "provider_id_of",
]
