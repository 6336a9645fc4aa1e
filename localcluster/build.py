"""Build the local control plane's binaries from the Go module proxy, once, cached by version.

Why a wrapper module: ``go install k8s.io/kubernetes/cmd/...@vX`` cannot work, because
k8s.io/kubernetes's go.mod replaces each staging module (k8s.io/api, k8s.io/client-go, ...)
by a nested directory that is not in the module zip. The wrapper module requires
k8s.io/kubernetes and replaces every staging module by its published ``v0.<minor>.<patch>``
(the pattern of kubernetes-sigs/scheduler-plugins and cluster-autoscaler). etcd's server and
kwok build from the same module, so the Kubernetes libraries are fetched and compiled once.

The result lives in ``$GROUPLESS_CACHE_DIR`` (default ``~/.cache/groupless``) under
``bin/<kubernetes version>-etcd<v>-kwok<v>/``, never in the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.8"  # the etcd that k8s.io/kubernetes v1.36.3 itself pins (go.mod, indirect)
KWOK_VERSION = "v0.8.0"

K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class BuildError(RuntimeError):
    """The toolchain is missing or a ``go`` command failed; the message says what to do."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built executables."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def complete(self) -> bool:
        return all(self.path(n).is_file() for n in (*K8S_COMMANDS, "etcd", "kwok"))


def cache_dir() -> Path:
    return Path(os.environ.get("GROUPLESS_CACHE_DIR", Path.home() / ".cache" / "groupless"))


def binaries() -> Binaries:
    tag = f"{KUBERNETES_VERSION}-etcd{ETCD_VERSION}-kwok{KWOK_VERSION}"
    return Binaries(cache_dir() / "bin" / tag)


def _log(message: str) -> None:
    print(f"[build] {message}", file=sys.stderr, flush=True)


#: Where the official Go tarball installs, used when ``go`` is not on PATH.
FALLBACK_GO = Path("/usr/local/go/bin/go")


def find_go() -> str:
    """The ``go`` executable: on PATH, else ``FALLBACK_GO``. Raises BuildError saying what to install."""
    go = shutil.which("go") or (str(FALLBACK_GO) if FALLBACK_GO.exists() else None)
    if go is None:
        raise BuildError(
            "the Go toolchain (go 1.26 or later) is needed to build kube-apiserver, etcd and kwok; "
            "install it from https://go.dev/dl/ and put `go` on PATH"
        )
    return go


_go = find_go  # the name localcluster.helm imports


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    started = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`{' '.join(args)}` failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    _log(f"{' '.join(args[:3])} ... done in {time.monotonic() - started:.0f}s")
    return proc.stdout


def _staging_modules(go: str, work: Path, env: dict[str, str]) -> list[str]:
    """The staging modules k8s.io/kubernetes requires at v0.0.0 (read from its go.mod)."""
    info = json.loads(_run([go, "mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}"], work, env))
    text = Path(info["GoMod"]).read_text()
    return sorted(set(re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0\s*$", text, flags=re.M)))


def wrapper_go_mod(staging: list[str]) -> str:
    """The wrapper go.mod: staging modules replaced by their published versions."""
    minor_patch = KUBERNETES_VERSION.removeprefix("v1.")
    lines = [
        "module groupless.dev/localcluster-build",
        "",
        "go 1.26.0",
        "",
        "godebug default=go1.26",
        "",
        "replace (",
        *(f"\t{m} => {m} v0.{minor_patch}" for m in staging),
        ")",
        "",
    ]
    return "\n".join(lines)


def build(force: bool = False) -> Binaries:
    """Build every binary that is missing and return their directory.

    Raises BuildError when Go is missing or a build step fails. Prints progress on stderr.
    """
    target = binaries()
    if target.complete and not force:
        return target
    go = find_go()
    work = cache_dir() / "src" / target.directory.name
    work.mkdir(parents=True, exist_ok=True)
    target.directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}
    started = time.monotonic()
    _log(f"building Kubernetes {KUBERNETES_VERSION}, etcd {ETCD_VERSION}, kwok {KWOK_VERSION} into {target.directory}")
    _log("this is a one-time build (about 20-40 minutes on 2 cores); later runs reuse it")
    staging = _staging_modules(go, work, env)
    (work / "go.mod").write_text(wrapper_go_mod(staging))
    (work / "tools.go").write_text(
        "//go:build tools\n\npackage tools\n\nimport (\n"
        + "".join(f'\t_ "k8s.io/kubernetes/cmd/{c}"\n' for c in K8S_COMMANDS)
        + '\t_ "go.etcd.io/etcd/server/v3"\n\t_ "sigs.k8s.io/kwok/cmd/kwok"\n)\n'
    )
    _run([go, "get", f"k8s.io/kubernetes@{KUBERNETES_VERSION}", f"go.etcd.io/etcd/server/v3@{ETCD_VERSION}",
          f"sigs.k8s.io/kwok@{KWOK_VERSION}"], work, env)
    _run([go, "mod", "tidy"], work, env)
    minor = KUBERNETES_VERSION.split(".")[1]
    ldflags = (
        f"-s -w -X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION} "
        f"-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor={minor} "
        "-X k8s.io/component-base/version.gitTreeState=clean "
        "-X k8s.io/client-go/pkg/version.gitVersion=" + KUBERNETES_VERSION
    )
    packages = {
        **{c: f"k8s.io/kubernetes/cmd/{c}" for c in K8S_COMMANDS},
        "etcd": "go.etcd.io/etcd/server/v3",
        "kwok": "sigs.k8s.io/kwok/cmd/kwok",
    }
    for name, package in packages.items():
        if target.path(name).is_file() and not force:
            continue
        _log(f"compiling {name} ({package})")
        out = target.path(name).with_suffix(".partial")
        _run([go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(out), package], work, env)
        out.rename(target.path(name))
    _log(f"all binaries built in {time.monotonic() - started:.0f}s")
    return target


if __name__ == "__main__":
    try:
        print(build(force="--force" in sys.argv).directory)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
