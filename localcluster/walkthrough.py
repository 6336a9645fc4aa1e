"""Observing the walkthrough on a local cluster: manifests, polls, tables, logs, events, instances.

Why one module for ``groupless demo`` and the e2e tests: both replay the same story
(``../shared/walkthrough/README.md``) and must look at the same things -- what ``kubectl``
shows a user, what the controller logs, what EC2 (the moto server) holds. The demo prints
them; the tests assert on them. Nothing here decides anything Groupless decides.
"""

from __future__ import annotations

import datetime
import importlib.resources
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from localcluster.cluster import AWS_REGION, LocalCluster
from provisioner import yamlload

REPO_ROOT = Path(__file__).resolve().parent.parent

#: The walkthrough's manifests, in the order the story applies them. A copy ships inside the
#: package (``localcluster/walkthrough/``) so that ``groupless demo`` works from any install;
#: ``../shared/walkthrough/`` (beside a clone, as in CI) is the reference they are copied from.
WALKTHROUGH_FILES = (
    "01-provisioner.yaml",
    "02-inflate-deployment.yaml",
    "03-pdb.yaml",
    "04-provisioner-with-expiry.yaml",
)

PROVISIONER_LABEL = "karpenter.sh/provisioner-name"
NODE_COLUMNS = "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type"
#: Every Event has a creationTimestamp; scheduler Events (events.k8s.io/v1) have no lastTimestamp.
EVENTS_SORT_KEY = ".metadata.creationTimestamp"


def embedded_walkthrough() -> Traversable:
    """The manifests shipped as package data (``localcluster/walkthrough/*.yaml``)."""
    return importlib.resources.files("localcluster") / "walkthrough"


def shared_walkthrough_dir() -> Path | None:
    """``<repo>/../shared/walkthrough`` when it exists beside the clone (CI, the project's tree), else None."""
    candidate = REPO_ROOT.parent / "shared" / "walkthrough"
    return candidate if (candidate / WALKTHROUGH_FILES[0]).is_file() else None


def walkthrough_source(prefer_shared: bool = False) -> Traversable:
    """Where to read the manifests from: the embedded copy, or ``../shared/walkthrough`` if asked and present.

    ``groupless demo`` uses the embedded copy (it must work from any install); the e2e tests
    prefer the shared directory so that they test the manifests as the walkthrough publishes them.
    """
    if prefer_shared:
        shared = shared_walkthrough_dir()
        if shared is not None:
            return shared
    return embedded_walkthrough()


def check_walkthrough(source: Traversable | None = None) -> None:
    """Raise FileNotFoundError naming every manifest of ``WALKTHROUGH_FILES`` missing from ``source``."""
    source = source or walkthrough_source()
    missing = [name for name in WALKTHROUGH_FILES if not (source / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"the walkthrough manifests {', '.join(missing)} are missing from {source} "
            "(a broken installation? reinstall with `pip install -e '.[dev-cluster]'`)"
        )


def load_manifest(name: str, source: Traversable | None = None) -> dict[str, Any]:
    """One walkthrough manifest as a dict (``name`` like ``01-provisioner.yaml``).

    ``source`` defaults to the embedded copy. Raises FileNotFoundError when the file is missing
    and ValueError when it is not one YAML object.
    """
    path = (source or walkthrough_source()) / name
    doc = yamlload.load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{name}: expected one YAML object")
    return doc


def node_age_seconds(node: dict[str, Any]) -> float:
    """Seconds since the object's ``metadata.creationTimestamp``."""
    created = datetime.datetime.fromisoformat(node["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return (datetime.datetime.now(datetime.UTC) - created).total_seconds()


def instance_id(provider_id: str) -> str:
    """``aws:///ap-south-1a/i-0123`` -> ``i-0123``."""
    return provider_id.rsplit("/", 1)[-1]


@dataclass
class LogCursor:
    """Reads the lines a component logged since the cursor was last advanced."""

    path: Path
    offset: int = 0

    def read(self) -> list[str]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data.rsplit(b"\n", 1)[0] + b"\n" if b"\n" in data else b""
        self.offset += len(complete)
        return complete.decode(errors="replace").splitlines()

    def skip(self) -> None:
        self.read()


class Observer:
    """Read-only views of a running local cluster, plus a few kubectl actions."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster
        self.controller_log = LogCursor(cluster.log_path("controller"))

    # ----- kubectl ------------------------------------------------------------------------
    def apply(self, manifest: dict[str, Any] | str | Path, check: bool = True) -> Any:
        """``kubectl apply -f`` a dict, a YAML string or a file; returns the CompletedProcess."""
        if isinstance(manifest, Path):
            return self.cluster.kubectl("apply", "-f", str(manifest), check=check)
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self.cluster.kubectl("apply", "-f", "-", input=text, check=check)

    def scale(self, deployment: str, replicas: int, namespace: str = "default") -> None:
        self.cluster.kubectl("scale", f"deployment/{deployment}", f"--replicas={replicas}", "-n", namespace)

    def node_table(self) -> str:
        return str(self.cluster.kubectl("get", "node", "-L", NODE_COLUMNS).stdout)

    def pods_wide(self, selector: str = "app=inflate", namespace: str = "default") -> str:
        return str(self.cluster.kubectl("get", "pods", "-o", "wide", "-l", selector, "-n", namespace).stdout)

    # ----- objects ------------------------------------------------------------------------
    def nodes(self, provisioner: str | None = None) -> list[dict[str, Any]]:
        """Nodes Groupless launched (label ``karpenter.sh/provisioner-name``), of one Provisioner if given."""
        selector = f"{PROVISIONER_LABEL}={provisioner}" if provisioner else PROVISIONER_LABEL
        items: list[dict[str, Any]] = self.cluster.kubectl_json("get", "nodes", "-l", selector)["items"]
        return items

    def pods(self, selector: str = "app=inflate", namespace: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.cluster.kubectl_json("get", "pods", "-l", selector, "-n", namespace)["items"]
        return items

    @staticmethod
    def running(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pods in phase Running that are not being deleted."""
        return [
            p for p in pods
            if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]

    def events(self, *, kind: str | None = None, name: str | None = None, namespace: str = "default") -> list[dict[str, Any]]:
        args = ["get", "events", "-n", namespace]
        selectors = []
        if kind:
            selectors.append(f"involvedObject.kind={kind}")
        if name:
            selectors.append(f"involvedObject.name={name}")
        if selectors:
            args += ["--field-selector", ",".join(selectors)]
        items: list[dict[str, Any]] = self.cluster.kubectl_json(*args)["items"]
        return items

    def events_table(self, namespace: str = "default") -> str:
        """``kubectl get events --sort-by=.metadata.creationTimestamp``.

        Not ``.lastTimestamp``: kube-scheduler writes events.k8s.io/v1 Events, which carry
        ``eventTime`` and no ``lastTimestamp``, so sorting by it puts them out of order.
        """
        return str(self.cluster.kubectl("get", "events", "-n", namespace, f"--sort-by={EVENTS_SORT_KEY}").stdout)

    def extender_requests(self) -> dict[tuple[str, str], float]:
        """Requests kube-scheduler made to the extender, by (verb, HTTP code), from its /metrics."""
        import ssl
        import urllib.request

        port = self.cluster.ports.get("extender")
        if port is None:
            return {}
        context = ssl.create_default_context(cafile=str(self.cluster.pki.ca.cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=context) as response:  # noqa: S310
            text = response.read().decode()
        counts: dict[tuple[str, str], float] = {}
        for match in re.finditer(r'^groupless_extender_request_duration_seconds_count\{([^}]*)\} (\S+)$', text, re.M):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            counts[(labels.get("verb", ""), labels.get("code", ""))] = float(match.group(2))
        return counts

    # ----- EC2 (the moto server) ----------------------------------------------------------
    def ec2(self) -> Any:
        import boto3

        endpoint = self.cluster.aws_endpoint_url
        if endpoint is None:
            raise RuntimeError("the local cluster runs no moto server (localcluster.aws is not installed)")
        return boto3.client(
            "ec2", region_name=AWS_REGION, endpoint_url=endpoint,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )

    def instances(self) -> dict[str, dict[str, Any]]:
        """Every EC2 instance of the account by id: ``{"i-...": {"state", "type", "zone", "tags", "launched"}}``."""
        found: dict[str, dict[str, Any]] = {}
        paginator = self.ec2().get_paginator("describe_instances")
        for page in paginator.paginate():
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    found[instance["InstanceId"]] = {
                        "state": instance["State"]["Name"],
                        "type": instance["InstanceType"],
                        "zone": instance["Placement"]["AvailabilityZone"],
                        "tags": {t["Key"]: t["Value"] for t in instance.get("Tags", [])},
                        "launched": instance.get("LaunchTime"),
                    }
        return found

    def live_instances(self) -> dict[str, dict[str, Any]]:
        """Instances not (being) terminated."""
        return {
            i: v for i, v in self.instances().items() if v["state"] not in ("terminated", "shutting-down")
        }

    # ----- waiting ------------------------------------------------------------------------
    @staticmethod
    def wait_for(
        condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5,
        on_poll: Callable[[], None] | None = None,
    ) -> Any:
        """Poll ``condition`` until it returns something truthy; raises TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            if on_poll is not None:
                on_poll()
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)


LOG_PATTERNS = {
    "batch": re.compile(r"Batched \d+ pods? in [\d.]+m?s"),
    "packing": re.compile(r"Computed packing of \d+ node\(s\) for \d+ pod\(s\) with instance type option\(s\)"),
    "launch": re.compile(r"Launched instance: i-[\w]+, hostname: [^,]+, type: [\w.]+, zone: [\w-]+, capacityType: [\w-]+"),
    "pdb": re.compile(r"Did not evict pod \S+ due to PDB violation"),
}


def matching(lines: Iterable[str], pattern: str) -> list[str]:
    """The lines matching one of ``LOG_PATTERNS`` (by key)."""
    regex = LOG_PATTERNS[pattern]
    return [line for line in lines if regex.search(line)]
