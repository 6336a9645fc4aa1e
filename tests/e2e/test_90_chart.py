"""The Helm chart's rendered manifests are accepted by a real kube-apiserver (server-side dry run).

Server-side dry run runs every admission step but persistence: the API server's own schema
validation of each kind (``--validate=strict``: an unknown or duplicate field is an error),
defaulting, RBAC escalation checks of the roles the chart grants, and the validation of the
webhook configurations. Objects are *created* in dry-run (no merge with what the test cluster
already holds): the release name makes the chart's names unique, and the two webhook
configurations, whose names are fixed, get a suffix. The CRD, identical to the one the cluster
runs, is server-side applied in dry-run. helm is built from the Go module proxy when missing.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import yaml

from localcluster.cluster import LocalCluster
from localcluster.helm import build_helm

CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart" / "groupless"


def rendered(release: str, namespace: str, *extra: str) -> list[dict[str, Any]]:
    args = [str(build_helm()), "template", release, str(CHART), "--namespace", namespace, "--include-crds",
            "--set", "clusterName=karpenter-demo", "--set", "clusterEndpoint=https://127.0.0.1:6443",
            "--set", "aws.defaultInstanceProfile=KarpenterNodeInstanceProfile-karpenter-demo", *extra]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def dry_run(cluster: LocalCluster, verb: list[str], objects: list[dict[str, Any]]) -> list[str]:
    proc = cluster.kubectl(*verb, "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-",
                           input=yaml.safe_dump_all(objects), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "unknown field" not in proc.stderr and "duplicate field" not in proc.stderr, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.strip()]


def test_rendered_chart_passes_server_side_dry_run(cluster: LocalCluster) -> None:
    suffix = uuid.uuid4().hex[:6]
    namespace = f"groupless-chart-{suffix}"
    cluster.kubectl("create", "namespace", namespace)
    try:
        for extra in ((), ("--set", "secondScheduler.enabled=true", "--set", "replicas=3", "--set", "logFormat=json")):
            objects = rendered(f"chart-{suffix}", namespace, *extra)
            crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
            others = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
            assert len(crds) == 1 and len(others) >= 11
            for obj in others:
                if obj["kind"].endswith("WebhookConfiguration"):
                    obj["metadata"]["name"] += f"-{suffix}"
            assert len(dry_run(cluster, ["create"], others)) == len(others)
            assert dry_run(cluster, ["apply", "--server-side", "--force-conflicts", "--field-manager=chart-test"],
                           crds) == ["customresourcedefinition.apiextensions.k8s.io/provisioners.karpenter.sh"]
        # nothing was created by the dry runs
        got = cluster.kubectl("get", "deployments,services,configmaps,serviceaccounts", "-n", namespace,
                              "-o", "name").stdout
        assert f"chart-{suffix}" not in got
        webhooks = cluster.kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout
        assert suffix not in webhooks
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
