"""``stop_process_group`` on real process groups: the leader and its children go, an unrelated process stays."""

from __future__ import annotations

import subprocess
import sys

from localcluster.cluster import _process_alive, stop_process_group
from tests.builders.expectations import eventually


def test_stop_process_group_kills_the_leader_and_its_children() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"],
        start_new_session=True,
    )
    def group() -> list[int]:
        out = subprocess.run(["pgrep", "-g", str(leader.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    assert eventually(lambda: len(group()) == 2)  # the leader has started its child
    children = group()
    assert stop_process_group(leader.pid, sys.executable, timeout=5)
    leader.wait(timeout=5)
    assert eventually(lambda: not any(_process_alive(pid) for pid in children if pid != leader.pid))
    assert not stop_process_group(leader.pid, sys.executable)


def test_stop_process_group_leaves_an_unrelated_process_alone() -> None:
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert not stop_process_group(other.pid, "/not/our/etcd")
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
