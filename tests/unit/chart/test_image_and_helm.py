"""The Dockerfile builds a non-root, read-only-root-friendly image; helm is cached per version."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from localcluster import helm

REPO = Path(__file__).resolve().parents[3]


def final_stage(text: str) -> str:
    return re.split(r"^FROM ", text, flags=re.M)[-1]


def test_image_runs_groupless_as_non_root_without_writing_outside_tmp() -> None:
    text = (REPO / "Dockerfile").read_text()
    # FROM ${BASE}: the base is a build argument (scripts/build-image.sh passes an mmdebstrap image)
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", text, flags=re.M))
    stages = [re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], s)
              for s in re.findall(r"^FROM (\S+)", text, flags=re.M)]
    assert len(stages) == 2 and all("slim" in s for s in stages), "multi-stage on a slim base"
    last = final_stage(text)
    user = re.findall(r"^USER (\S+)", last, flags=re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert re.search(r'^ENTRYPOINT \["groupless"\]', last, flags=re.M)
    assert "PYTHONDONTWRITEBYTECODE=1" in last and "HOME=/tmp" in last
    assert "compileall" in text, "byte-compiled at build time: the root filesystem is read-only at run time"
    # the chart runs the same uid the image declares
    values = (REPO / "deploy" / "chart" / "groupless" / "values.yaml").read_text()
    assert f"runAsUser: {user[-1].split(':')[0]}" in values


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "tests", "docs"} <= ignored
    copied = re.findall(r"^COPY (?!--from)(\S+)", (REPO / "Dockerfile").read_text(), flags=re.M)
    assert not ignored & set(copied)


def test_helm_is_cached_per_version_under_the_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))
    path = helm.helm_path("v9.9.9")
    assert path == tmp_path / "bin" / f"helm-v9.9.9-k8s1.{helm.HELM_K8S_MINOR}" / "helm"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    assert helm.build_helm("v9.9.9") == path  # present: no build


