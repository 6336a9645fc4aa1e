"""Build the ``helm`` CLI from the Go module proxy, once, cached by version.

Why: the chart in ``deploy/chart/groupless`` is tested by rendering it with the real ``helm
template`` (a hand-rolled Go-template renderer would test nothing), and this machine has no
package manager that ships helm but does have Go and the module proxy. ``helm.sh/helm/v3`` has
no ``replace`` directives, so a plain ``go install <module>/cmd/helm@<version>`` works; it is run
with ``GOTOOLCHAIN=local`` (no toolchain download) and ``GOBIN`` pointed at the cache.

The binary lives in ``$GROUPLESS_CACHE_DIR`` (default ``~/.cache/groupless``) under
``bin/helm-<version>/helm``, never in the repository. Run ``python -m localcluster.helm`` to
build it ahead of the tests (a few minutes on 2 cores, less when the module cache is warm).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from localcluster.build import BuildError, _go, cache_dir

#: helm v3.22.0 requires go 1.26.0 in its go.mod, which the local toolchain satisfies.
HELM_VERSION = "v3.22.0"
HELM_PACKAGE = "helm.sh/helm/v3/cmd/helm"
#: The Kubernetes minor helm assumes in ``helm template`` (Capabilities.KubeVersion) and lint.
#: Helm's Makefile sets it from its client-go (v0.37.0 in v3.22.0 -> 1.37); a plain ``go install``
#: would leave the compiled-in default of v1.20, which charts with ``kubeVersion`` reject.
HELM_K8S_MINOR = "37"


class HelmBuildError(BuildError):
    """Go is missing or ``go install`` failed; the message carries go's stderr tail."""


def helm_path(version: str = HELM_VERSION) -> Path:
    """Where the helm binary of ``version`` is (or will be) cached."""
    return cache_dir() / "bin" / f"helm-{version}-k8s1.{HELM_K8S_MINOR}" / "helm"


def build_helm(version: str = HELM_VERSION, force: bool = False) -> Path:
    """Return the path of a helm binary of ``version``, building it with ``go install`` if absent.

    The build goes to a temporary GOBIN and is renamed into place, so an interrupted build never
    leaves a half-written binary that later calls would trust. Raises HelmBuildError.
    """
    target = helm_path(version)
    if target.is_file() and not force:
        return target
    go = _go()  # raises BuildError naming the missing toolchain
    staging = target.parent / "partial"
    staging.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=mod -buildvcs=false",
        "GOBIN": str(staging),
    }
    started = time.monotonic()
    print(f"[helm] go install {HELM_PACKAGE}@{version} (one-time, cached in {target.parent})",
          file=sys.stderr, flush=True)
    ldflags = " ".join([
        "-s -w",
        f"-X helm.sh/helm/v3/internal/version.version={version}",
        *(f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
          for pkg in ("chartutil", "lint/rules")
          for part, value in (("Major", "1"), ("Minor", HELM_K8S_MINOR))),
    ])
    proc = subprocess.run(
        [go, "install", "-trimpath", "-ldflags", ldflags, f"{HELM_PACKAGE}@{version}"],
        env=env, capture_output=True, text=True, cwd=staging,
    )
    if proc.returncode != 0:
        raise HelmBuildError(f"go install {HELM_PACKAGE}@{version} failed (exit {proc.returncode}):\n"
                             f"{proc.stderr[-4000:]}")
    (staging / "helm").rename(target)
    shutil.rmtree(staging, ignore_errors=True)
    print(f"[helm] built in {time.monotonic() - started:.0f}s: {target}", file=sys.stderr, flush=True)
    return target


if __name__ == "__main__":
    try:
        print(build_helm(force="--force" in sys.argv))
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
