"""The cache's transform keeps every field a reader of the cache reads.

The component suites that read through a :class:`~provisioner.state.cluster.ClusterState`
(provisioning, lifecycle, the extender's live state, the kwok provider, the cache itself) and
the metrics' unit tests run in a child pytest with ``tests.integration.state.recording``: each
cached object is enriched with every field the transform drops, stripped, and recorded as it
is read. A path a reader asked for that the enriched object has and the stripped one lost (or
changed) is a violation; so is a failing test, since a reader missing a field misbehaves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SUITES = (
    "tests/component/provisioning",
    "tests/component/lifecycle",
    "tests/component/extender/test_extender_live_state.py",
    "tests/component/cloudprovider/test_kwok.py",
    "tests/component/kube/test_cluster_state.py",
    "tests/unit/observability/test_metrics.py",
    "tests/unit/observability/test_scrape.py",
)


@pytest.mark.timeout(900)
def test_every_field_read_through_the_cache_survives_the_transform(tmp_path: Path) -> None:
    report = tmp_path / "reads.json"
    run = subprocess.run(  # noqa: S603 - our own test suites
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "tests.integration.state.recording",
         "--record-reads", str(report), *SUITES],
        cwd=REPO, capture_output=True, text=True, timeout=850,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    result = json.loads(report.read_text())
    assert result["objects"] > 1000  # the suites did read through caches
    assert result["violations"] == []
