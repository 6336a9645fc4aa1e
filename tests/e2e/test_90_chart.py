"""The Helm chart's rendered manifests are accepted by a real kube-apiserver (server-side dry run).

Server-side dry run runs every admission step but persistence: schema validation of each kind
(unknown fields are reported as warnings, shown by ``--validate=strict`` as errors), defaulting,
RBAC escalation checks of the roles we grant, and webhook configuration validation. helm is
built from the Go module proxy when missing; the cluster comes from the session fixture.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import yaml

from localcluster.cluster import LocalCluster
from localcluster.helm import build_helm

CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart" / "groupless"


def rendered(namespace: str, *extra: str) -> str:
    args = [str(build_helm()), "template", "groupless", str(CHART), "--namespace", namespace,
            "--set", "clusterName=karpenter-demo", "--set", "clusterEndpoint=https://127.0.0.1:6443",
            "--set", "aws.defaultInstanceProfile=KarpenterNodeInstanceProfile-karpenter-demo", *extra]
    if (CHART / "crds").is_dir() and any((CHART / "crds").glob("*.yaml")):
        args.append("--include-crds")
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout


def test_rendered_chart_passes_server_side_dry_run(cluster: LocalCluster) -> None:
    namespace = f"groupless-chart-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", namespace)
    try:
        for extra in ((), ("--set", "secondScheduler.enabled=true", "--set", "replicas=3", "--set", "logFormat=json")):
            manifest = rendered(namespace, *extra)
            kinds = [d["kind"] for d in yaml.safe_load_all(manifest) if d]
            proc = cluster.kubectl("apply", "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-",
                                   input=manifest, check=False)
            assert proc.returncode == 0, proc.stderr
            accepted = [line for line in proc.stdout.splitlines() if line.strip()]
            assert len(accepted) == len(kinds), (accepted, kinds)
            assert "warning" not in proc.stderr.lower(), proc.stderr
        # nothing was created by the dry run
        got = cluster.kubectl("get", "deployments,services,configmaps", "-n", namespace, "-o", "name").stdout
        assert "groupless" not in got
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
