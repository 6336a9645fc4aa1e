"""``groupless plan``: the dry run. Manifests in, the nodes Groupless would launch out.

Users ask "what would the autoscaler buy for this?" before they apply anything. This command
reads the same objects the controller watches (Provisioners, pods and their controllers,
DaemonSets, Nodes, volumes, LimitRanges) from YAML or JSON files, takes the instance-type catalog from
saved EC2 answers (``aws ec2 describe-instance-types`` / ``describe-instance-type-offerings``
output) or from EC2 itself (a moto server works), and runs the very solver the provisioning
controller runs. Provisioners get the admission webhook's defaults and validation, so an
object the cluster would refuse is refused here too, and the webhook's warnings are printed.
Pods (and the pods of workloads and DaemonSets) get their namespace's LimitRange defaults, as
admission gives them to the pods the cluster creates
(:mod:`provisioner.scheduling.limitranges`).

The region decides the prices, so it is never guessed silently: ``--region``, else the region
of the offerings file's zones, else (catalog from EC2) ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` /
the profile's region; without any, the command asks for ``--region``. The region and where the
prices came from are printed with the plan, and a pricing file without that region is a warning.

Errors (bad YAML, unknown kinds, invalid objects, unreadable catalog files) name the file and
the document (1-based) and exit with status 1; no plan is printed then. A plan in which some
pods are unschedulable is still a plan: status 0, like ``kubectl apply --dry-run``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from provisioner import yamlload
from provisioner.api.types import Provisioner
from provisioner.cloudprovider import catalogfiles
from provisioner.cloudprovider.catalogfiles import region_of_zone
from provisioner.model import objects
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.limitranges import apply_limit_range_defaults, container_defaults
from provisioner.scheduling.solver import Plan, SolverInput, solve
from provisioner.state.cluster import snapshot_of
from provisioner.state.nodes import NodeViews
from provisioner.state.solverinput import build_solver_input, provisionable_pods

T = TypeVar("T")

if TYPE_CHECKING:
    from provisioner.cloudprovider.aws.amifamily import MissingImage

#: Kinds read for the plan.
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
#: Kinds that often sit beside workloads in a manifest directory and do not change a plan.
IGNORED_KINDS = frozenset({
    "Namespace", "Service", "ConfigMap", "Secret", "ServiceAccount", "Role",
    "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Ingress", "NetworkPolicy", "HorizontalPodAutoscaler",
    "PriorityClass", "ResourceQuota", "CronJob", "Endpoints", "EndpointSlice",
    "CustomResourceDefinition", "AWSNodeTemplate", "EC2NodeClass",
})
EXTENSIONS = (".yaml", ".yml", ".json")


class PlanInputError(Exception):
    """Input that cannot be planned; the message names the file and document."""


@dataclass
class Inputs:
    provisioners: list[Provisioner] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[dict[str, Any]] = field(default_factory=list)
    storage_classes: list[dict[str, Any]] = field(default_factory=list)
    limit_ranges: list[dict[str, Any]] = field(default_factory=list)
    #: PodDisruptionBudgets (read by ``--consolidate`` only).
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    where: dict[int, str] = field(default_factory=dict)  # id(pod object) -> "file, document N"
    #: Advice that does not stop the plan (webhook warnings, replaced Provisioners), "file: document N: ..."
    warnings: list[str] = field(default_factory=list)


#: ``-f -``: read the manifests from standard input, as ``kubectl apply -f -`` does.
STDIN = "-"
#: How standard input is named in messages (kubectl says ``error validating "STDIN"``).
STDIN_NAME = "STDIN"
#: Kinds of newer Karpenter APIs that Groupless does not serve, with what to write instead.
_KARPENTER_V1_KINDS = frozenset({"NodePool", "NodeClaim", "Machine"})


# ----------------------------------------------------------------------------- reading
def _files(paths: Sequence[str]) -> Iterator[Path | None]:
    """The files to read, in order; None stands for standard input (``-f -``)."""
    stdin_seen = False
    for raw in paths:
        if raw == STDIN:
            if stdin_seen:
                raise PlanInputError("-f -: standard input can be read only once")
            stdin_seen = True
            yield None
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in EXTENSIONS)
            if not found:
                raise PlanInputError(f"no YAML or JSON files in {raw} (looked for {', '.join(EXTENSIONS)})")
            yield from found
        elif path.exists():
            yield path
        else:
            raise PlanInputError(f"{raw}: no such file or directory")


def _documents(path: Path | None) -> Iterator[tuple[int, Any]]:
    """(1-based document number, object) of a file, or of standard input when ``path`` is None."""
    name = STDIN_NAME if path is None else str(path)
    try:
        text = sys.stdin.read() if path is None else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlanInputError(f"{name}: cannot read: {error}") from error
    as_json = path is not None and path.suffix == ".json"
    try:
        if as_json:
            docs: list[Any] = [json.loads(text)]
        else:
            docs = list(yamlload.load_all(text))
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise PlanInputError(f"{name}: not valid {'JSON' if as_json else 'YAML'}: {error}") from error
    index = 0
    for doc in docs:
        if doc is None:
            continue
        index += 1
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                yield index, item
        else:
            yield index, doc


def _named(kind: str, obj: Mapping[str, Any]) -> str:
    """``Provisioner default``, ``Pod team/web-0``, or ``a Provisioner without metadata.name``."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not name:
        return f"a {kind} without metadata.name"
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return f"{kind} {namespace}/{name}" if namespace and kind not in ("Provisioner", "Node") else f"{kind} {name}"


def _expand(kind: str, obj: Mapping[str, Any], where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods (and claims, for StatefulSet volumeClaimTemplates) a workload object stands for."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = str(metadata.get("name") or "")
    namespace = str(metadata.get("namespace") or "default")
    template = spec.get("template")
    if not name:
        raise PlanInputError(f"{where}: {_named(kind, obj)}: metadata.name: required field is missing")
    if not isinstance(template, Mapping):
        raise PlanInputError(f"{where}: {kind} {namespace}/{name}: spec.template: required")
    try:
        if kind == "Job":
            replicas = int(spec.get("parallelism", 1))
            if spec.get("completions") is not None:
                replicas = min(replicas, int(spec["completions"]))
        else:
            replicas = int(spec.get("replicas", 1))
    except (TypeError, ValueError) as error:
        raise PlanInputError(f"{where}: {kind} {namespace}/{name}: replicas: not an integer") from error
    pods, claims = [], []
    for i in range(max(replicas, 0)):
        pod_name = f"{name}-{i}"
        tmeta = dict(template.get("metadata") or {})
        tmeta.update(name=pod_name, namespace=namespace, uid=f"plan/{kind}/{namespace}/{name}/{i}",
                     ownerReferences=[{"kind": kind, "name": name, "controller": True}])
        pod_spec = dict(template.get("spec") or {})
        if kind == "StatefulSet":
            volumes = list(pod_spec.get("volumes") or [])
            for claim_template in spec.get("volumeClaimTemplates") or ():
                cname = str((claim_template.get("metadata") or {}).get("name") or "")
                claim_name = f"{cname}-{name}-{i}"
                volumes.append({"name": cname, "persistentVolumeClaim": {"claimName": claim_name}})
                claims.append({"metadata": {"name": claim_name, "namespace": namespace},
                               "spec": dict(claim_template.get("spec") or {})})
            pod_spec["volumes"] = volumes
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": tmeta, "spec": pod_spec})
    return pods, claims


def _provisioner(obj: dict[str, Any], where: str, warnings: list[str]) -> Provisioner:
    """The defaulted, validated Provisioner; the webhook's warnings are appended to ``warnings``."""
    from provisioner.api.defaults import default_provisioner
    from provisioner.api.schemas import load_provisioner
    from provisioner.api.validation import validate_provisioner

    named = _named("Provisioner", obj)
    try:
        defaulted = default_provisioner(obj)
        result = validate_provisioner(defaulted)
        if result.errors:
            raise PlanInputError(f"{where}: {named}: invalid: {result.message}")
        warnings.extend(f"{where}: {named}: {warning}" for warning in result.warnings)
        return load_provisioner(defaulted)
    except PlanInputError:
        raise
    except ValueError as error:
        raise PlanInputError(f"{where}: {named}: invalid: {error}") from error


def _unknown_kind(kind: str, doc: Mapping[str, Any], where: str) -> PlanInputError:
    api_version = doc.get("apiVersion")
    message = f"{where}: unknown kind {kind!r} (apiVersion {api_version})"
    if kind in _KARPENTER_V1_KINDS or str(api_version or "").startswith("karpenter."):
        message += ("; Groupless serves Karpenter's karpenter.sh/v1alpha5 Provisioner API: write it as "
                    "`apiVersion: karpenter.sh/v1alpha5`, `kind: Provisioner` (see docs/provisioner-reference.md)")
    return PlanInputError(message)


def read_inputs(paths: Sequence[str]) -> Inputs:
    """Every object of ``paths`` sorted into :class:`Inputs`. Raises PlanInputError.

    ``paths``: files, directories (every ``.yaml``/``.yml``/``.json`` file below, sorted) or
    ``-`` for standard input. Like ``kubectl apply -f``, an object without ``apiVersion`` is
    refused and a later Provisioner of the same name replaces an earlier one (with a warning).
    """
    inputs = Inputs()
    provisioner_where: dict[str, str] = {}
    for path in _files(paths):
        for index, doc in _documents(path):
            where = f"{STDIN_NAME if path is None else path}: document {index}"
            kind = _checked_kind(doc, where)
            if kind == "Provisioner":
                _add_provisioner(inputs, doc, where, provisioner_where)
            elif kind not in IGNORED_KINDS:
                _add_object(inputs, kind, doc, where)
    # like `kubectl apply -f`, a later object of the same name replaces an earlier one
    inputs.provisioners = list({p.name: p for p in inputs.provisioners}.values())
    _admit(inputs)
    return inputs


def _checked_kind(doc: Any, where: str) -> str:
    """The kind of one document, refused (PlanInputError) as kubectl refuses it: no object, kind or apiVersion."""
    if not isinstance(doc, dict):
        raise PlanInputError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
    kind = doc.get("kind")
    if not kind:
        raise PlanInputError(f"{where}: kind: required field is missing")
    if not doc.get("apiVersion"):
        raise PlanInputError(f"{where}: {_named(str(kind), doc)}: apiVersion: required field is missing "
                             f"(kubectl refuses an object without it)")
    return str(kind)


def _add_provisioner(inputs: Inputs, doc: dict[str, Any], where: str, provisioner_where: dict[str, str]) -> None:
    provisioner = _provisioner(doc, where, inputs.warnings)
    if provisioner.name in provisioner_where:
        inputs.warnings.append(
            f"{where}: Provisioner {provisioner.name} replaces the one in "
            f"{provisioner_where[provisioner.name]} (same name; the later one wins, as with kubectl apply)")
    provisioner_where[provisioner.name] = where
    inputs.provisioners.append(provisioner)


def _add_pod(inputs: Inputs, doc: dict[str, Any], where: str) -> None:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not (metadata.get("name") or metadata.get("generateName")):
        raise PlanInputError(f"{where}: a Pod without metadata.name: metadata.name: required field is "
                             f"missing (or metadata.generateName)")
    if not metadata.get("name"):  # as the API server would name it
        doc = {**doc, "metadata": {**metadata, "name": f"{metadata['generateName']}{len(inputs.pods)}"}}
    inputs.pods.append(doc)
    inputs.where[id(doc)] = where


def _add_object(inputs: Inputs, kind: str, doc: dict[str, Any], where: str) -> None:
    """File one object other than a Provisioner into ``inputs``; PlanInputError for a kind plan cannot use."""
    if kind == "Pod":
        _add_pod(inputs, doc, where)
    elif kind in WORKLOAD_KINDS:
        pods, claims = _expand(kind, doc, where)
        for pod in pods:
            inputs.where[id(pod)] = where
        inputs.pods.extend(pods)
        inputs.pvcs.extend(claims)
    elif kind == "DaemonSet":
        inputs.daemonsets.append(doc)
        inputs.where[id(doc)] = where
    elif kind == "LimitRange":
        try:
            container_defaults(doc)
        except ValueError as error:
            raise PlanInputError(f"{where}: {_named('LimitRange', doc)}: {error}") from error
        inputs.limit_ranges.append(doc)
    else:
        lists = {"Node": inputs.nodes, "PersistentVolumeClaim": inputs.pvcs, "PersistentVolume": inputs.pvs,
                 "StorageClass": inputs.storage_classes, "PodDisruptionBudget": inputs.pdbs}
        if kind not in lists:
            raise _unknown_kind(kind, doc, where)
        lists[kind].append(doc)


def _admit(inputs: Inputs) -> None:
    """Give the pods that were never created their namespace's LimitRange defaults, as admission would.

    A pod with a ``metadata.creationTimestamp`` was read from a cluster (``kubectl get -o yaml``):
    admission has completed it already. Raises PlanInputError naming the pod's file and document.
    """
    if not inputs.limit_ranges:
        return
    admitted = []
    for pod in inputs.pods:
        where = inputs.where.get(id(pod), "")
        if objects.meta(pod).get("creationTimestamp"):
            admitted.append(pod)
            continue
        try:
            completed = apply_limit_range_defaults(pod, inputs.limit_ranges)
        except ValueError as error:
            raise PlanInputError(f"{where}: {_named('Pod', pod)}: {error}") from error
        if completed is not pod:
            pod = dict(completed)
            inputs.where[id(pod)] = where
        admitted.append(pod)
    inputs.pods = admitted


# ----------------------------------------------------------------------------- catalog
#: The logger whose "no price known ... estimating" warning plan reprints as one ``warning:`` line.
_CATALOG_LOGGER = "provisioner.cloudprovider.aws.catalog"


def _catalog_file(read: Callable[[], T]) -> T:
    """``read()`` with the shared catalog reader's CatalogFileError turned into PlanInputError."""
    try:
        return read()
    except catalogfiles.CatalogFileError as error:
        raise PlanInputError(str(error)) from error


def offerings_region(offerings: Sequence[Mapping[str, Any]], path: str) -> str:
    """The one region of the offerings' zones. Raises PlanInputError (asking for --region) when it is not one region."""
    try:
        return catalogfiles.offerings_region(offerings, path)
    except catalogfiles.CatalogFileError as error:
        raise PlanInputError(f"{error}: pass --region") from error


def _environment_region() -> tuple[str, str] | None:
    """(region, where it came from) from AWS_REGION, AWS_DEFAULT_REGION or the AWS profile, else None."""
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(variable):
            return os.environ[variable], f"${variable}"
    import boto3

    profile_region = boto3.session.Session().region_name
    if profile_region:
        return profile_region, "the AWS profile"
    return None


def _from_ec2(region: str, endpoint_url: str | None) -> tuple[list[Any], list[Any]]:
    import boto3
    import botocore.exceptions

    where = f"EC2 ({endpoint_url or region})"
    try:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)
        types = [t for page in ec2.get_paginator("describe_instance_types").paginate() for t in page["InstanceTypes"]]
        offerings = [
            o for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone")
            for o in page["InstanceTypeOfferings"]
        ]
    except botocore.exceptions.NoCredentialsError as error:
        raise PlanInputError(
            f"{where}: {error}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); a moto server "
            f"accepts any values, e.g. AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing") from error
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
        raise PlanInputError(f"{where}: {error}") from error
    return types, offerings


@dataclass
class Catalog:
    """What :func:`read_catalog` found: instance types per Provisioner, the region and its prices."""

    instance_types: dict[str, list[InstanceType]]
    region: str
    #: How the region was chosen: ``--region``, ``the offerings' zones``, ``$AWS_REGION``, ...
    region_source: str
    #: Where the prices came from, e.g. ``pricing file p.json over static table``.
    price_source: str
    #: ``capacity-type/instance-type`` pairs whose price is an estimate, sorted.
    estimated: tuple[str, ...] = ()
    #: Provisioner name -> instance types not offered to it: its ``amiFamily`` has no image for them.
    missing_images: dict[str, tuple[MissingImage, ...]] = field(default_factory=dict)


class _Captured(logging.Handler):
    """Collects the catalog's warnings so that plan prints them once, in its own form."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def read_catalog(args: argparse.Namespace, provisioners: Sequence[Provisioner], warnings: list[str]) -> Catalog:
    """Instance types per Provisioner, region and prices.

    Each Provisioner's instance types come from the controller's own conversion
    (:func:`~provisioner.cloudprovider.aws.catalog.instance_types_for` under its
    :class:`~provisioner.cloudprovider.aws.catalog.NodeConfiguration`: ``blockDeviceMappings``,
    ``kubeletConfiguration``, ``amiFamily`` and ``--eni-limited-pod-density``), so the plan's
    nodes are the ones the controller would launch.

    Region: ``--region``; else, with ``--offerings``, the region of its zones; else (catalog from
    EC2) ``AWS_REGION``, ``AWS_DEFAULT_REGION`` or the profile's; else PlanInputError asking for
    ``--region``. Advice (region mismatch, pricing file without the region, estimated prices)
    is appended to ``warnings``.
    """
    from provisioner.cloudprovider.aws.catalog import NodeConfiguration, instance_types_for

    if args.instance_types or args.offerings:
        if not (args.instance_types and args.offerings):
            raise PlanInputError("--instance-types and --offerings go together")
        types = _catalog_file(lambda: catalogfiles.read_instance_types(args.instance_types))
        offerings = _catalog_file(lambda: catalogfiles.read_offerings(args.offerings))
        zones_region = offerings_region(offerings, args.offerings) if offerings else None
        if args.region:
            region, region_source = args.region, "--region"
            if zones_region and zones_region != region:
                warnings.append(f"--region {region} but the offerings in {args.offerings} are in {zones_region}: "
                                f"prices are looked up for {region}")
        elif zones_region:
            region, region_source = zones_region, f"the zones of {args.offerings}"
        else:
            raise PlanInputError(f"{args.offerings}: no offerings to tell the region from: pass --region")
    else:
        if args.region:
            region, region_source = args.region, "--region"
        else:
            found = _environment_region()
            if found is None:
                raise PlanInputError(
                    f"no AWS region to read the catalog from EC2 ({args.aws_endpoint_url or 'AWS'}): pass --region "
                    f"(or set AWS_REGION), or give --instance-types and --offerings files")
            region, region_source = found
        types, offerings = _from_ec2(region, args.aws_endpoint_url)
    book = _catalog_file(lambda: catalogfiles.price_book(args.pricing_file, region, warnings))
    result = {}
    missing_images = {}
    captured = _Captured()
    logger = logging.getLogger(_CATALOG_LOGGER)
    propagate = logger.propagate
    logger.addHandler(captured)
    logger.propagate = False
    try:
        for p in provisioners:
            try:
                config = NodeConfiguration.of(p, eni_limited_pod_density=args.eni_limited_pod_density)
            except ValueError as error:
                raise PlanInputError(f"Provisioner {p.name}: {error}") from error
            try:
                result[p.name], missing = instance_types_for(config, types, offerings, book)
            except (KeyError, TypeError, ValueError) as error:
                raise PlanInputError(f"instance type catalog: {error}") from error
            if missing:
                missing_images[p.name] = missing
    finally:
        logger.removeHandler(captured)
        logger.propagate = propagate
    estimated = tuple(book.estimated())
    if estimated:
        shown = ", ".join(estimated[:6]) + (f" and {len(estimated) - 6} more" if len(estimated) > 6 else "")
        warnings.append(f"no price known in {region} for {shown} (prices from {book.source}): estimated from vCPU, "
                        f"memory, GPU and architecture; pass --pricing-file with prices for {region} for real figures")
    # any other catalog warning, as is (the estimate one is summarised above)
    warnings.extend(r.getMessage() for r in captured.records if "price known" not in r.getMessage())
    return Catalog(instance_types=result, region=region, region_source=region_source,
                   price_source=str(book.source), estimated=estimated, missing_images=missing_images)


def load_catalog(args: argparse.Namespace, provisioners: Sequence[Provisioner]) -> dict[str, list[InstanceType]]:
    """Instance types per Provisioner (see :func:`read_catalog`; its warnings go to stderr)."""
    warnings: list[str] = []
    catalog = read_catalog(args, provisioners, warnings)
    _print_warnings(warnings)
    return catalog.instance_types


def _print_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


# ----------------------------------------------------------------------------- planning
def build_input(inputs: Inputs, catalog: Mapping[str, Sequence[InstanceType]], now: float | None = None) -> SolverInput:
    """The solver input from ``inputs``, by the provisioning controller's rules (:mod:`provisioner.state.solverinput`).

    The manifests become a :class:`~provisioner.state.cluster.Snapshot`; the pods to plan for
    are those the controller would provision for, kube-scheduler's verdict aside (a dry run's
    pods have never been scheduled). ``now``: epoch seconds for the nominations' deadlines
    (default: the wall clock). Raises PlanInputError naming the first object that cannot be read.
    """
    taken_at = time.time() if now is None else now
    snapshot = snapshot_of(
        nodes=inputs.nodes, pods=inputs.pods, provisioners=inputs.provisioners, daemonsets=inputs.daemonsets,
        persistent_volumes=inputs.pvs, persistent_volume_claims=inputs.pvcs, storage_classes=inputs.storage_classes,
        limit_ranges=inputs.limit_ranges, taken_at=taken_at,
    )
    views = NodeViews().nodes(snapshot)
    pending = provisionable_pods(snapshot, views, taken_at, candidates=inputs.pods, require_unschedulable=False)
    built = build_solver_input(snapshot, views, pending, catalog, now=taken_at,
                               provisioners={p.name: p for p in inputs.provisioners})
    for refused in built.refused:
        where = inputs.where.get(id(refused.obj))
        prefix = f"{where}: " if where else ""
        raise PlanInputError(f"{prefix}{_named(refused.kind, refused.obj)}: {refused.reason}")
    return built.input


def plan_to_json(plan: Plan, catalog: Catalog | None = None) -> dict[str, Any]:
    """The JSON form documented in docs/plan.md.

    With ``catalog``, ``region``, ``priceSource`` and ``estimatedPrices`` come first, then, when
    some instance types were not offered to a Provisioner for lack of an image, ``notOffered``:
    ``[{"provisioner", "reason", "instanceTypes"}]``.
    """
    result: dict[str, Any] = {}
    if catalog is not None:
        result.update(region=catalog.region, priceSource=catalog.price_source,
                      estimatedPrices=list(catalog.estimated))
        not_offered = [{"provisioner": name, "reason": m.reason, "instanceTypes": list(m.instance_types)}
                       for name, missing in sorted(catalog.missing_images.items()) for m in missing]
        if not_offered:
            result["notOffered"] = not_offered
    result.update({
        "nodes": [
            {
                "provisioner": n.provisioner,
                "instanceTypes": [it.name for it in n.instance_type_options],
                "zone": n.offering.zone,
                "capacityType": n.offering.capacity_type,
                "pricePerHour": round(n.price, 6),
                "pods": [p.key for p in n.pods],
            }
            for n in plan.new_nodes
        ],
        "existing": [{"node": e.node, "pods": [p.key for p in e.pods]} for e in plan.existing],
        "unschedulable": [{"pod": e.pod.key, "reason": e.reason} for e in plan.unschedulable],
        "totalPricePerHour": round(plan.total_price, 6),
    })
    return result


def plan_to_table(plan: Plan, catalog: Catalog | None = None) -> str:
    """A human table: one line per new node, then existing placements, unschedulable pods, the total.

    With ``catalog``, a first line names the region, where it came from, and the price source,
    and a ``Not offered to Provisioner ...`` line before the total names each group of instance
    types left out for lack of an image.
    """
    lines = []
    if catalog is not None:
        estimated = f"; {len(catalog.estimated)} estimated" if catalog.estimated else ""
        lines.append(f"Region: {catalog.region} (from {catalog.region_source}); "
                     f"prices: {catalog.price_source}{estimated}")
    if plan.new_nodes:
        header = ("PROVISIONER", "INSTANCE TYPE", "ZONE", "CAPACITY TYPE", "$/HOUR", "PODS", "OPTIONS")
        rows = [header]
        for n in plan.new_nodes:
            options = [it.name for it in n.instance_type_options]
            more = f" (+{len(options) - 3} more)" if len(options) > 3 else ""
            rows.append((n.provisioner, options[0], n.offering.zone, n.offering.capacity_type, f"{n.price:.4f}",
                         str(len(n.pods)), ", ".join(options[:3]) + more))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    else:
        lines.append("No new nodes.")
    for e in plan.existing:
        lines.append(f"Existing node {e.node}: {len(e.pods)} pod(s): {', '.join(p.key for p in e.pods)}")
    for err in plan.unschedulable:
        lines.append(f"Unschedulable {err.pod.key}: {err.reason}")
    for name, missing in sorted((catalog.missing_images if catalog is not None else {}).items()):
        lines.extend(f"Not offered to Provisioner {name}: {_missing_image_line(m)}" for m in missing)
    pod_count = sum(len(n.pods) for n in plan.new_nodes)
    lines.append(f"Total: {len(plan.new_nodes)} new node(s) for {pod_count} pod(s), "
                 f"${plan.total_price:.4f}/hour")
    return "\n".join(lines)


def _missing_image_line(missing: MissingImage) -> str:
    names = missing.instance_types
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"{missing.reason} ({shown})"


def run(args: argparse.Namespace) -> int:
    """``groupless plan``: 0 when a plan was printed (even with unschedulable pods), 1 on input errors."""
    warnings: list[str] = []
    try:
        inputs = read_inputs(args.file)
        warnings.extend(inputs.warnings)
        if not inputs.provisioners:
            raise PlanInputError("no Provisioner in the input: nothing could be launched")
        catalog = read_catalog(args, inputs.provisioners, warnings)
        if getattr(args, "consolidate", False):
            return _consolidate(inputs, catalog, args.output, warnings)
        plan = solve(build_input(inputs, catalog.instance_types))
    except PlanInputError as error:
        _print_warnings(warnings)
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # an invalid Provisioner requirement the validator let through
        _print_warnings(warnings)
        print(f"error: {error}", file=sys.stderr)
        return 1
    _print_warnings(warnings)
    if args.output == "json":
        print(json.dumps(plan_to_json(plan, catalog), indent=2))
    else:
        print(plan_to_table(plan, catalog))
    return 0


def _consolidate(inputs: Inputs, catalog: Catalog, output: str, warnings: list[str]) -> int:
    """``--consolidate``: consolidation's moves over the Nodes and bound Pods (:mod:`provisioner.plan_consolidation`)."""
    from provisioner.plan_consolidation import plan_consolidation, to_json, to_table

    result = plan_consolidation(nodes=inputs.nodes, pods=inputs.pods, provisioners=inputs.provisioners,
                                catalog=catalog.instance_types, daemonsets=inputs.daemonsets, pdbs=inputs.pdbs,
                                now=time.time())
    _print_warnings(warnings)
    if output == "json":
        print(json.dumps({"region": catalog.region, "priceSource": catalog.price_source, **to_json(result)}, indent=2))
    else:
        print(f"Region: {catalog.region} (from {catalog.region_source}); prices: {catalog.price_source}")
        print(to_table(result))
    return 0


DESCRIPTION = """\
Dry run: print the nodes Groupless would launch for the given manifests.

Reads Provisioners, Pods, Deployments, ReplicaSets, StatefulSets and Jobs (expanded to their
replicas), DaemonSets, Nodes, PersistentVolumes, claims, StorageClasses and LimitRanges from
YAML or JSON files, and runs the same solver as the controller. Provisioners get the admission
webhook's defaults and validation; pods their namespace's LimitRange defaults. The instance
types come from saved EC2 answers (--instance-types and --offerings, the JSON output of
`aws ec2 describe-instance-types` and
`aws ec2 describe-instance-type-offerings --location-type availability-zone`) or from EC2
itself (or a moto server, with --aws-endpoint-url)."""

EPILOG = """\
region:
  --region, else the region of the offerings file's zones, else (catalog from EC2) $AWS_REGION,
  $AWS_DEFAULT_REGION or the AWS profile's region. The region and the price source are printed
  with the plan; prices the pricing file and the static table lack are estimated (a warning).

EC2 or moto:
  Reading the catalog from EC2 needs credentials even for a moto server, which accepts any:
    export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=ap-south-1
    groupless plan -f manifests/ --aws-endpoint-url http://127.0.0.1:5000
  (`python -m localcluster.aws --port 5000` starts a seeded moto and prints these lines.)

exit status:
  0  the plan was printed (some pods may be unschedulable: they are listed with the reason)
  1  input error (unreadable or invalid manifest, catalog or pricing file, no region); no plan

examples:
  groupless plan -f provisioner.yaml -f deployment.yaml \\
      --instance-types types.json --offerings offerings.json --pricing-file prices.json
  kubectl get provisioners,deploy,nodes,pods -A -o yaml | groupless plan -f - --region ap-south-1 -o json"""


def _bool_flag(text: str) -> bool:
    """``true``/``false`` (also 1/0, yes/no, on/off), read as the controller reads its boolean settings."""
    from provisioner.settings import parse_bool

    try:
        return parse_bool(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def register(subparsers: Any) -> None:
    """Add ``groupless plan`` to the CLI."""
    parser = subparsers.add_parser(
        "plan",
        help="dry run: print the nodes Groupless would launch for the given manifests",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-f", "--filename", dest="file", action="append", required=True, metavar="PATH",
                        help="YAML/JSON file (multi-document), directory of them, or - for standard input; "
                             "repeatable")
    parser.add_argument("--instance-types", metavar="FILE",
                        help="DescribeInstanceTypes response JSON (with --offerings); default: ask EC2")
    parser.add_argument("--offerings", metavar="FILE",
                        help="DescribeInstanceTypeOfferings (LocationType availability-zone) response JSON")
    parser.add_argument("--pricing-file", metavar="FILE",
                        help='prices, {"<region>": {"<type>": usd}} or {"<region>": {"on-demand": {...}, "spot": {...}}}; '
                             "overrides the static list prices of the region")
    parser.add_argument("--region", default=None,
                        help="AWS region (default: the offerings file's, else $AWS_REGION, $AWS_DEFAULT_REGION "
                             "or the AWS profile's)")
    parser.add_argument("--aws-endpoint-url", metavar="URL",
                        help="EC2 endpoint to read the catalog from (for example a moto server); needs credentials")
    parser.add_argument("--consolidate", action="store_true",
                        help="print what consolidation would do with the given Nodes and the Pods bound to them, "
                             "move after move, and what it would save (docs/consolidation.md)")
    parser.add_argument("--eni-limited-pod-density", type=_bool_flag, default=True, metavar="true|false",
                        help="pod capacity from the ENI limits of each instance type (default true); false: 110 "
                             "pods, as the controller's --eni-limited-pod-density=false")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="table (default) or json: {region, priceSource, estimatedPrices, nodes, existing, "
                             "unschedulable, totalPricePerHour}")
    parser.set_defaults(func=run)


__all__ = ["register", "run", "read_inputs", "read_catalog", "load_catalog", "build_input", "plan_to_json",
           "plan_to_table", "region_of_zone", "offerings_region", "Catalog", "Inputs",
           "PlanInputError"]
