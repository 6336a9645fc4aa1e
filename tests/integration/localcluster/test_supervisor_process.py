"""``python -m localcluster.supervisor`` with a real child: SIGKILL it and it comes back, counted.

Started the way ``LocalCluster._spawn`` starts a supervised component: its own process group,
its entry written under the state file's lock while it starts, stdout to the component's log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from localcluster import supervisor
from localcluster.cluster import REPO_ROOT, _process_alive

T = TypeVar("T")

CHILD = "import os, time; print(f'child {os.getpid()} up', flush=True); time.sleep(600)"


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Supervised:
    def __init__(self, directory: Path, name: str, command: list[str], ready: bool):
        self.state_file = directory / "state.json"
        self.log = directory / f"{name}.log"
        self.name = name
        argv = supervisor.supervise_command(name, self.state_file, command)
        with supervisor.locked_state(self.state_file, create=True) as state, self.log.open("ab") as log:
            assert state is not None
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
            state["components"] = {name: {"pid": self.process.pid, "pgid": self.process.pid, "argv": argv,
                                          "log": str(self.log), **({"ready": True} if ready else {})}}

    def entry(self) -> dict[str, Any]:
        state = supervisor.read_state(self.state_file) or {}
        entry: dict[str, Any] = state.get("components", {}).get(self.name, {})
        return entry

    def running_child(self, other_than: int | None = None) -> int | None:
        entry = self.entry()
        child = entry.get("child_pid")
        if entry.get("state") == supervisor.RUNNING and child and child != other_than and _process_alive(child) \
                and f"child {child} up" in self.log.read_text():
            return int(child)
        return None


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[Supervised]:
    supervised = Supervised(tmp_path, "sleeper", [sys.executable, "-c", CHILD], ready=True)
    try:
        yield supervised
    finally:
        if supervised.process.poll() is None:
            os.killpg(supervised.process.pid, signal.SIGKILL)
            supervised.process.wait(timeout=10)


def test_a_killed_component_is_restarted_with_its_restart_count_in_the_state_file(sleeper: Supervised) -> None:
    first = wait_for("the first child to run", sleeper.running_child)
    assert sleeper.entry()["restarts"] == 0
    os.kill(first, signal.SIGKILL)
    second = wait_for("a restarted child", lambda: sleeper.running_child(other_than=first))
    entry = sleeper.entry()
    assert entry["restarts"] == 1 and entry["last_exit_code"] == -signal.SIGKILL
    assert not _process_alive(first)
    log = sleeper.log.read_text()
    assert "supervisor: sleeper exited (killed by SIGKILL) after" in log
    assert f"supervisor: sleeper restarted (restart 1), pid {second}" in log
    assert log.count(" up\n") == 2  # both children wrote to the component's log

    # as `dev-cluster down` does: SIGTERM to the group; the supervisor does not restart it and exits
    os.killpg(sleeper.process.pid, signal.SIGTERM)
    assert sleeper.process.wait(timeout=10) == 128 + signal.SIGTERM
    wait_for("the child to be gone", lambda: not _process_alive(second), timeout=5)
    assert sleeper.entry()["state"] == supervisor.STOPPED and sleeper.entry()["restarts"] == 1


def test_a_supervisor_killed_hard_takes_its_component_with_it(sleeper: Supervised) -> None:
    child = wait_for("the child to run", sleeper.running_child)
    sleeper.process.send_signal(signal.SIGKILL)  # the supervisor alone, not the group
    sleeper.process.wait(timeout=10)
    wait_for("the child to die with its supervisor (PR_SET_PDEATHSIG)", lambda: not _process_alive(child), timeout=5)


def test_an_exit_before_ready_ends_the_supervisor_with_the_component_code(tmp_path: Path) -> None:
    supervised = Supervised(tmp_path, "webhook", [sys.executable, "-c", "import sys; sys.exit(3)"], ready=False)
    assert supervised.process.wait(timeout=20) == 3
    entry = supervised.entry()
    assert entry["state"] == supervisor.EXITED and entry["restarts"] == 0 and entry["last_exit_code"] == 3
    assert "before it was ready: not restarting" in supervised.log.read_text()
    assert json.loads(supervised.state_file.read_text())["components"]["webhook"]["pid"] == supervised.process.pid
