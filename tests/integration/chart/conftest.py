"""The chart tests render with the real ``helm``, built with the Go toolchain on first use.

The build (``localcluster.helm.build_helm``: minutes when cold, cached per version in
``~/.cache/groupless``) runs once after collection, before any test and outside the per-test
timeout. When it fails, every chart test fails with the reason: CI never passes by skipping the
chart. The tests carry the ``needs_go`` marker (``-m "not needs_go"`` leaves them out).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pytest

from localcluster.helm import HelmBuildError, build_helm, helm_path

HERE = Path(__file__).parent
_failure: str | None = None


def _chart_items(items: list[pytest.Item]) -> list[pytest.Item]:
    return [item for item in items if HERE in Path(str(item.fspath)).parents]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in _chart_items(items):
        item.add_marker(pytest.mark.needs_go)


def pytest_collection_finish(session: pytest.Session) -> None:
    global _failure
    if session.config.option.collectonly or not _chart_items(session.items) or helm_path().is_file():
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    started = time.monotonic()
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            build_helm()
    except HelmBuildError as error:
        _failure = f"helm could not be built: {error}"
        return
    print(f"[chart] helm built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


@pytest.fixture(scope="session", autouse=True)
def helm_was_built() -> None:
    """Before the module-scoped ``helm`` fixtures, so a failed build is not retried per module."""
    if _failure:
        pytest.fail(_failure, pytrace=False)
