"""One component of a local cluster stopped and kept stopped, its own pid read: what the fault tests do to components."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import supervisor
from localcluster.cluster import ClusterError, LocalCluster, _process_alive
from tests.builders.expectations import eventually

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster("component-control", directory=tmp_path)
    cluster.logs.mkdir(parents=True)
    yield cluster
    cluster.down(quiet=True)


def test_a_killed_supervised_component_stays_down_and_leaves_the_state(local: LocalCluster) -> None:
    component = local._spawn("sleeper", SLEEPER, supervised=True)
    supervisor.mark_ready(local.state_file, "sleeper")  # from now on its supervisor would restart it
    assert eventually(lambda: local.child_pid("sleeper") is not None, 30)
    child = local.child_pid("sleeper")
    assert child is not None and child != component.pid and _process_alive(child)

    local.stop_component("sleeper", kill=True)

    assert not _process_alive(component.pid)
    assert eventually(lambda: not _process_alive(child), 10)  # the group went: nothing restarts it
    assert "sleeper" not in (supervisor.read_state(local.state_file) or {}).get("components", {})
    assert local.child_pid("sleeper") is None and local.components == []


def test_unknown_components_are_refused_with_their_name(local: LocalCluster) -> None:
    with pytest.raises(ClusterError, match="no component 'etcd' of cluster 'component-control' runs"):
        local.stop_component("etcd")
    with pytest.raises(ClusterError, match="cannot start component 'etcd': expected kube-apiserver, webhook"):
        local.start_component("etcd")
