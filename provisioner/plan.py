"""``groupless plan``: the dry run. Manifests in, the nodes Groupless would launch out.

Users ask "what would the autoscaler buy for this?" before they apply anything. This command
reads the same objects the controller watches (Provisioners, pods and their controllers,
DaemonSets, Nodes, volumes) from YAML or JSON files, takes the instance-type catalog from
saved EC2 answers (``aws ec2 describe-instance-types`` / ``describe-instance-type-offerings``
output) or from EC2 itself (a moto server works), and runs the very solver the provisioning
controller runs. Provisioners get the admission webhook's defaults and validation, so an
object the cluster would refuse is refused here too.

Errors (bad YAML, unknown kinds, invalid objects, unreadable catalog files) name the file and
the document (1-based) and exit with status 1; no plan is printed then.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provisioner.api.types import Provisioner
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.nodes import ClusterNode, node_from_manifest, resource_list
from provisioner.scheduling.pods import (
    Pod,
    is_daemonset_pod,
    is_static_pod,
    is_terminal,
    pod_from_manifest,
)
from provisioner.scheduling.resources import Resources
from provisioner.scheduling.solver import Plan, SolverInput, solve
from provisioner.scheduling.volumes import volume_requirements

#: Kinds read for the plan.
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
#: Kinds that often sit beside workloads in a manifest directory and do not change a plan.
IGNORED_KINDS = frozenset({
    "Namespace", "Service", "ConfigMap", "Secret", "ServiceAccount", "PodDisruptionBudget", "Role",
    "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Ingress", "NetworkPolicy", "HorizontalPodAutoscaler",
    "PriorityClass", "LimitRange", "ResourceQuota", "CronJob", "Endpoints", "EndpointSlice",
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
    where: dict[int, str] = field(default_factory=dict)  # id(pod object) -> "file, document N"


# ----------------------------------------------------------------------------- reading
def _files(paths: Sequence[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in EXTENSIONS)
            yield from found
        elif path.exists():
            yield path
        else:
            raise PlanInputError(f"{raw}: no such file or directory")


def _documents(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlanInputError(f"{path}: cannot read: {error}") from error
    try:
        if path.suffix == ".json":
            docs: list[Any] = [json.loads(text)]
        else:
            docs = list(yaml.safe_load_all(text))
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise PlanInputError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from error
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


def _expand(kind: str, obj: Mapping[str, Any], where: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods (and claims, for StatefulSet volumeClaimTemplates) a workload object stands for."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = str(metadata.get("name") or "")
    namespace = str(metadata.get("namespace") or "default")
    template = spec.get("template")
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


def _provisioner(obj: dict[str, Any], where: str) -> Provisioner:
    from provisioner.api.defaults import default_provisioner
    from provisioner.api.schemas import load_provisioner
    from provisioner.api.validation import validate_provisioner

    name = (obj.get("metadata") or {}).get("name")
    try:
        defaulted = default_provisioner(obj)
        result = validate_provisioner(defaulted)
        if result.errors:
            raise PlanInputError(f"{where}: Provisioner {name}: invalid: {result.message}")
        return load_provisioner(defaulted)
    except PlanInputError:
        raise
    except ValueError as error:
        raise PlanInputError(f"{where}: Provisioner {name}: invalid: {error}") from error


def read_inputs(paths: Sequence[str]) -> Inputs:
    """Every object of ``paths`` sorted into :class:`Inputs`. Raises PlanInputError."""
    inputs = Inputs()
    for path in _files(paths):
        for index, doc in _documents(path):
            where = f"{path}: document {index}"
            if not isinstance(doc, dict):
                raise PlanInputError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
            kind = doc.get("kind")
            if not kind:
                raise PlanInputError(f"{where}: kind: required")
            if kind == "Provisioner":
                inputs.provisioners.append(_provisioner(doc, where))
            elif kind == "Pod":
                inputs.pods.append(doc)
                inputs.where[id(doc)] = where
            elif kind in WORKLOAD_KINDS:
                pods, claims = _expand(str(kind), doc, where)
                for pod in pods:
                    inputs.where[id(pod)] = where
                inputs.pods.extend(pods)
                inputs.pvcs.extend(claims)
            elif kind == "DaemonSet":
                inputs.daemonsets.append(doc)
                inputs.where[id(doc)] = where
            elif kind == "Node":
                inputs.nodes.append(doc)
            elif kind == "PersistentVolumeClaim":
                inputs.pvcs.append(doc)
            elif kind == "PersistentVolume":
                inputs.pvs.append(doc)
            elif kind == "StorageClass":
                inputs.storage_classes.append(doc)
            elif kind in IGNORED_KINDS:
                continue
            else:
                raise PlanInputError(f"{where}: unknown kind {kind!r} (apiVersion {doc.get('apiVersion')})")
    # like `kubectl apply -f`, a later object of the same name replaces an earlier one
    inputs.provisioners = list({p.name: p for p in inputs.provisioners}.values())
    return inputs


# ----------------------------------------------------------------------------- catalog
def _json_file(path: str, key: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise PlanInputError(f"{path}: cannot read: {error}") from error
    except json.JSONDecodeError as error:
        raise PlanInputError(f"{path}: not valid JSON: {error}") from error
    if isinstance(document, list):
        return document
    if not isinstance(document, dict) or not isinstance(document.get(key), list):
        raise PlanInputError(f"{path}: expected the {key} response shape ({{\"{key}\": [...]}})")
    items: list[dict[str, Any]] = document[key]
    return items


def _from_ec2(region: str, endpoint_url: str | None) -> tuple[list[Any], list[Any]]:
    import boto3
    import botocore.exceptions

    try:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)
        types = [t for page in ec2.get_paginator("describe_instance_types").paginate() for t in page["InstanceTypes"]]
        offerings = [
            o for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone")
            for o in page["InstanceTypeOfferings"]
        ]
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
        raise PlanInputError(f"EC2 ({endpoint_url or region}): {error}") from error
    return types, offerings


def load_catalog(args: argparse.Namespace, provisioners: Sequence[Provisioner]) -> dict[str, list[InstanceType]]:
    """Instance types per Provisioner (kubelet settings change pods and overhead)."""
    from provisioner.cloudprovider.aws.catalog import (
        PricingFileError,
        instance_types_from_ec2,
        load_pricing_file,
        static_price_book,
    )

    if args.instance_types or args.offerings:
        if not (args.instance_types and args.offerings):
            raise PlanInputError("--instance-types and --offerings go together")
        types = _json_file(args.instance_types, "InstanceTypes")
        offerings = _json_file(args.offerings, "InstanceTypeOfferings")
    else:
        types, offerings = _from_ec2(args.region, args.aws_endpoint_url)
    book = static_price_book(args.region)
    if args.pricing_file:
        try:
            book = book.merged(load_pricing_file(args.pricing_file, args.region))
        except (OSError, PricingFileError) as error:
            raise PlanInputError(f"{args.pricing_file}: {error}") from error
    result = {}
    for p in provisioners:
        try:
            result[p.name] = instance_types_from_ec2(types, offerings, book, kubelet=p.spec.kubelet_configuration)
        except (KeyError, TypeError, ValueError) as error:
            raise PlanInputError(f"instance type catalog: {error}") from error
    return result


# ----------------------------------------------------------------------------- planning
def build_input(inputs: Inputs, catalog: Mapping[str, Sequence[InstanceType]]) -> SolverInput:
    """The solver input: pending pods, DaemonSets, nodes and limits usage from ``inputs``."""
    pending: list[Pod] = []
    for obj in inputs.pods:
        spec = obj.get("spec") or {}
        if spec.get("nodeName") or is_daemonset_pod(obj) or is_static_pod(obj) or is_terminal(obj):
            continue
        where = inputs.where.get(id(obj), "input")
        name = (obj.get("metadata") or {}).get("name")
        try:
            reqs = volume_requirements(obj, inputs.pvcs, inputs.pvs, inputs.storage_classes)
            pending.append(pod_from_manifest(obj, reqs))
        except ValueError as error:
            raise PlanInputError(f"{where}: Pod {name}: {error}") from error
    daemonsets = []
    for ds in inputs.daemonsets:
        try:
            daemonsets.append(daemonset_pod(ds))
        except ValueError as error:
            raise PlanInputError(f"{inputs.where.get(id(ds), 'input')}: DaemonSet "
                                 f"{(ds.get('metadata') or {}).get('name')}: {error}") from error
    nodes: list[ClusterNode] = []
    usage: dict[str, Resources] = {}
    for node in inputs.nodes:
        try:
            cluster_node = node_from_manifest(node, inputs.pods)
        except ValueError as error:
            raise PlanInputError(f"Node {(node.get('metadata') or {}).get('name')}: {error}") from error
        nodes.append(cluster_node)
        if cluster_node.provisioner:
            capacity = resource_list((node.get("status") or {}).get("capacity"), "status.capacity")
            usage[cluster_node.provisioner] = usage.get(cluster_node.provisioner, Resources()) + capacity
    return SolverInput(pods=pending, provisioners=inputs.provisioners, instance_types=catalog, nodes=nodes,
                       daemonsets=daemonsets, provisioner_usage=usage)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The JSON form documented in issue 4."""
    return {
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
    }


def plan_to_table(plan: Plan) -> str:
    """A human table: one line per new node, then existing placements and unschedulable pods."""
    lines = []
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
    pod_count = sum(len(n.pods) for n in plan.new_nodes)
    lines.append(f"Total: {len(plan.new_nodes)} new node(s) for {pod_count} pod(s), "
                 f"${plan.total_price:.4f}/hour")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        inputs = read_inputs(args.file)
        if not inputs.provisioners:
            raise PlanInputError("no Provisioner in the input: nothing could be launched")
        catalog = load_catalog(args, inputs.provisioners)
        plan = solve(build_input(inputs, catalog))
    except PlanInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ValueError as error:  # an invalid Provisioner requirement the validator let through
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(plan_to_json(plan), indent=2))
    else:
        print(plan_to_table(plan))
    return 0


def register(subparsers: Any) -> None:
    """Add ``groupless plan`` to the CLI."""
    parser = subparsers.add_parser(
        "plan",
        help="dry run: print the nodes Groupless would launch for the given manifests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-f", "--filename", dest="file", action="append", required=True, metavar="PATH",
                        help="YAML/JSON file (multi-document) or directory of them; repeatable")
    parser.add_argument("--instance-types", metavar="FILE",
                        help="DescribeInstanceTypes response JSON (with --offerings); default: ask EC2")
    parser.add_argument("--offerings", metavar="FILE",
                        help="DescribeInstanceTypeOfferings (LocationType availability-zone) response JSON")
    parser.add_argument("--pricing-file", metavar="FILE",
                        help='prices, {"<region>": {"<type>": usd}} or {"<region>": {"on-demand": {...}, "spot": {...}}}')
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                        or "us-east-1", help="AWS region (default: $AWS_REGION, else us-east-1)")
    parser.add_argument("--aws-endpoint-url", metavar="URL", help="EC2 endpoint (for example a moto server)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.set_defaults(func=run)


__all__ = ["register", "run", "read_inputs", "build_input", "plan_to_json", "plan_to_table", "PlanInputError"]
