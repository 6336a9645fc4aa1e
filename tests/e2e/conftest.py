"""The e2e tier: one real local control plane per test session (``localcluster``).

A test that cannot get its cluster FAILS with the reason (Go missing, a component that did
not start and the tail of its log): CI must never pass by skipping the real thing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.build import BuildError
from localcluster.cluster import ClusterError, LocalCluster, Settings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


_failure: str | None = None


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """A running local cluster (Groupless included when installed), stopped after the session."""
    global _failure
    if _failure:
        pytest.fail(_failure, pytrace=False)
    name = os.environ.get("GROUPLESS_E2E_CLUSTER", "e2e")
    local = LocalCluster(name, Settings())
    local.down(quiet=True)  # leftovers of an interrupted run
    started = time.monotonic()
    try:
        local.up(progress=lambda m: print(f"[e2e cluster {time.monotonic() - started:5.1f}s] {m}",
                                          file=sys.stderr, flush=True))
    except (BuildError, ClusterError) as error:
        _failure = f"the local control plane could not start: {error}"
        pytest.fail(_failure, pytrace=False)
    print(f"\n[e2e] warm cluster start: {local.started_seconds:.1f}s", file=sys.stderr)
    try:
        yield local
    finally:
        local.down(quiet=True)
