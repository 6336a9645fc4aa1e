"""``groupless dev-cluster status`` lines: restart counts and the supervised component's own pid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcluster.cli import component_line
from provisioner.cli import main

SUPERVISED = {"pid": 50, "pgid": 50, "argv": ["py", "-m", "localcluster.supervisor"], "log": "/l/controller.log",
              "ready": True, "state": "running", "restarts": 2, "child_pid": 61, "last_exit_code": -9}
PLAIN = {"pid": 40, "pgid": 40, "argv": ["etcd"], "log": "/l/etcd.log"}


def test_a_supervised_component_shows_its_own_pid_and_restart_count() -> None:
    line, running = component_line("controller", SUPERVISED, alive=lambda pid: pid in (50, 61))
    assert line.split() == ["controller", "pid", "61", "running", "restarts", "2", "log", "/l/controller.log"]
    assert running


def test_a_supervised_component_between_exit_and_restart_is_in_back_off() -> None:
    waiting = {**SUPERVISED, "state": "back-off", "child_pid": None}
    line, running = component_line("controller", waiting, alive=lambda pid: pid == 50)
    assert line.split()[:6] == ["controller", "pid", "-", "back-off", "restarts", "2"]
    assert not running
    # killed a moment ago: the supervisor has not noticed yet, status does not say running
    line, running = component_line("controller", SUPERVISED, alive=lambda pid: pid == 50)
    assert line.split()[3] == "back-off" and not running


def test_components_without_a_supervisor_and_gone_ones() -> None:
    line, running = component_line("etcd", PLAIN, alive=lambda pid: True)
    assert line.split() == ["etcd", "pid", "40", "running", "restarts", "-", "log", "/l/etcd.log"]
    assert running
    line, running = component_line("controller", SUPERVISED, alive=lambda pid: False)
    assert line.split()[:4] == ["controller", "pid", "50", "EXITED"] and not running


def test_status_reads_the_state_file_of_another_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))
    directory = tmp_path / "clusters" / "other"
    directory.mkdir(parents=True)
    # pids that are certainly not running: the status is EXITED and the exit code 1
    gone = {**SUPERVISED, "pid": 2**22 + 1, "pgid": 2**22 + 1}
    (directory / "state.json").write_text(json.dumps({"kubeconfig": "/k", "ports": {"etcd": 1},
                                                      "components": {"controller": gone}}))
    assert main(["dev-cluster", "status", "--name", "other"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[2].split()[:6] == ["controller", "pid", str(2**22 + 1), "EXITED", "restarts", "2"]


def test_status_of_a_cluster_never_started_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))
    assert main(["dev-cluster", "status", "--name", "never"]) == 1
    assert "is not running" in capsys.readouterr().out
    assert not (tmp_path / "clusters" / "never").exists()
