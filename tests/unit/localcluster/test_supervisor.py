"""The dev cluster's supervisor: back-off, restart counting, stopping, and its state-file entry.

A fake clock (time advances only when the supervisor sleeps or a fake process runs) and a fake
launcher (scripted run times and exit codes) drive the real Supervisor; no sleeps, no subprocess.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from localcluster import supervisor as sup
from localcluster.supervisor import BackOff, Status, Supervisor


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[float], None] | None = None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(seconds)


@dataclass
class FakeProcess:
    clock: FakeClock
    pid: int
    runs_for: float
    code: int
    on_wait: Callable[[FakeProcess], None] | None = None
    signals: list[int] = field(default_factory=list)

    def wait(self) -> int:
        self.clock.now += self.runs_for
        if self.on_wait:
            self.on_wait(self)
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)


class FakeLauncher:
    """Starts scripted processes: one (seconds it runs, exit code) per launch; stops the supervisor after the last."""

    def __init__(self, clock: FakeClock, script: list[tuple[float, int]]):
        self.clock = clock
        self.script = list(script)
        self.started: list[FakeProcess] = []
        self.supervisor: Supervisor | None = None

    def __call__(self) -> FakeProcess:
        runs_for, code = self.script[len(self.started)]
        last = len(self.started) == len(self.script) - 1
        process = FakeProcess(self.clock, 100 + len(self.started), runs_for, code,
                              on_wait=self._stop if last else None)
        self.started.append(process)
        return process

    def _stop(self, process: FakeProcess) -> None:
        assert self.supervisor is not None
        self.supervisor.stop()
        process.code = -signal.SIGTERM


def supervised(script: list[tuple[float, int]], **kwargs: object) -> tuple[Supervisor, FakeClock, FakeLauncher,
                                                                          list[Status], list[str]]:
    clock = FakeClock()
    launcher = FakeLauncher(clock, script)
    reports: list[Status] = []
    lines: list[str] = []
    supervisor = Supervisor("controller", launcher, clock=clock, report=reports.append, log=lines.append,
                            **kwargs)  # type: ignore[arg-type]
    launcher.supervisor = supervisor
    return supervisor, clock, launcher, reports, lines


def test_backoff_doubles_from_one_second_to_a_thirty_second_cap() -> None:
    assert [BackOff().delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert BackOff().delay(5000) == 30  # no float overflow in a long crash loop


@pytest.mark.parametrize("kwargs, field_name", [
    ({"initial_seconds": 0}, "initial_seconds"), ({"factor": 0.5}, "factor"),
    ({"max_seconds": 0.5}, "max_seconds"), ({"reset_after_seconds": 0}, "reset_after_seconds"),
])
def test_backoff_refuses_settings_that_would_spin_or_never_wait(kwargs: dict[str, float], field_name: str) -> None:
    with pytest.raises(ValueError, match=field_name):
        BackOff(**kwargs)
    with pytest.raises(ValueError, match="failures"):
        BackOff().delay(0)


def test_a_crash_loop_waits_1_2_4_8_16_30_30_seconds_and_counts_each_restart() -> None:
    supervisor, clock, launcher, reports, _ = supervised([(0.5, 1)] * 7 + [(5.0, 0)])
    code = supervisor.run()
    assert clock.sleeps == [1, 2, 4, 8, 16, 30, 30]
    assert supervisor.restarts == 7 and len(launcher.started) == 8
    assert code == -signal.SIGTERM
    assert [r.restarts for r in reports if r.state == sup.RUNNING] == [0, 1, 2, 3, 4, 5, 6, 7]


def test_a_run_of_sixty_seconds_forgets_the_earlier_failures() -> None:
    supervisor, clock, _, _, _ = supervised([(5, 1), (5, 1), (5, 1), (61, 1), (5, 1), (1, 0)])
    supervisor.run()
    # 1, 2, 4 for the crash loop; the 61 s run resets it: 1, then 2 again
    assert clock.sleeps == [1, 2, 4, 1, 2]
    assert supervisor.restarts == 5


def test_reports_and_log_say_which_process_ran_how_it_exited_and_the_restart_count() -> None:
    supervisor, _, _, reports, lines = supervised([(42.0, -signal.SIGKILL), (3.0, 0)])
    supervisor.run()
    assert reports == [
        Status(sup.RUNNING, 0, 100, None),
        Status(sup.BACK_OFF, 0, None, -signal.SIGKILL),
        Status(sup.RUNNING, 1, 101, -signal.SIGKILL),
        Status(sup.STOPPED, 1, None, -signal.SIGTERM),
    ]
    assert lines == [
        "controller exited (killed by SIGKILL) after 42.0 s; restart 1 in 1 s (back-off: failure 1 in a row)",
        "controller restarted (restart 1), pid 101",
    ]


def test_an_exit_before_the_component_was_ready_is_not_restarted() -> None:
    supervisor, clock, launcher, reports, lines = supervised([(0.3, 3), (1, 0)], may_restart=lambda: False)
    assert supervisor.run() == 3
    assert len(launcher.started) == 1 and clock.sleeps == [] and supervisor.restarts == 0
    assert reports[-1] == Status(sup.EXITED, 0, None, 3)
    assert lines == ["controller exited (exit code 3) after 0.3 s, before it was ready: not restarting"]


def test_stop_during_the_back_off_starts_nothing_more() -> None:
    supervisor, clock, launcher, reports, _ = supervised([(1, 1), (1, 1)])
    clock.on_sleep = lambda seconds: supervisor.stop()
    assert supervisor.run() == 1
    assert len(launcher.started) == 1 and supervisor.restarts == 0
    assert reports[-1] == Status(sup.STOPPED, 0, None, 1)


def test_stop_while_running_signals_the_component_and_does_not_restart_it() -> None:
    supervisor, _, launcher, _, _ = supervised([(10, 0)])
    supervisor.run()
    assert len(launcher.started) == 1
    process = launcher.started[0]
    process.signals.clear()
    supervisor.stop(signal.SIGINT)  # a later stop reaches the (last) process with the signal given
    assert process.signals == [signal.SIGINT]


def test_a_stop_that_arrives_while_launching_reaches_the_new_process() -> None:
    clock = FakeClock()
    started: list[FakeProcess] = []
    holder: list[Supervisor] = []

    def launch() -> FakeProcess:
        holder[0].stop()  # the signal handler ran before the new process was known
        process = FakeProcess(clock, 7, 1.0, -signal.SIGTERM)
        started.append(process)
        return process

    holder.append(Supervisor("webhook", launch, clock=clock, log=lambda line: None))
    assert holder[0].run() == -signal.SIGTERM
    assert started[0].signals == [signal.SIGTERM]


def test_a_component_that_cannot_be_started_backs_off_like_a_crash() -> None:
    clock = FakeClock()
    attempts: list[float] = []
    holder: list[Supervisor] = []

    def launch() -> FakeProcess:
        attempts.append(clock.now)
        if len(attempts) == 3:
            holder[0].stop()
        raise FileNotFoundError(2, "No such file or directory", "groupless")

    lines: list[str] = []
    holder.append(Supervisor("extender", launch, clock=clock, log=lines.append))
    assert holder[0].run() == sup.LAUNCH_FAILED
    assert [t - attempts[0] for t in attempts] == [0, 1, 3]
    assert lines[0] == "extender could not be started: [Errno 2] No such file or directory: 'groupless'"
    assert "exit code 127 (not started or command not found)" in lines[1]


def test_exit_status_and_descriptions_follow_shell_conventions() -> None:
    assert sup.exit_status(-signal.SIGKILL) == 137 and sup.exit_status(3) == 3
    assert sup.describe_exit(-signal.SIGTERM) == "killed by SIGTERM"
    assert sup.describe_exit(-200) == "killed by signal 200"
    assert sup.describe_exit(2) == "exit code 2"


# ----- the state file --------------------------------------------------------------------
def write_state(path: Path, components: dict[str, dict[str, object]]) -> None:
    path.write_text(json.dumps({"name": "t", "ports": {}, "components": components}))


def test_record_status_updates_only_the_entry_of_its_own_supervisor(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    write_state(state, {"controller": {"pid": 10, "pgid": 10, "argv": ["x"], "log": "l"},
                        "webhook": {"pid": 11, "pgid": 11, "argv": ["y"], "log": "m"}})
    assert sup.record_status(state, "controller", 10, Status(sup.RUNNING, 2, 4242, -9))
    assert not sup.record_status(state, "webhook", 99, Status(sup.RUNNING, 5, 1, None))  # another supervisor's
    saved = json.loads(state.read_text())["components"]
    assert saved["controller"] == {"pid": 10, "pgid": 10, "argv": ["x"], "log": "l", "state": "running",
                                   "restarts": 2, "child_pid": 4242, "last_exit_code": -9}
    assert saved["webhook"] == {"pid": 11, "pgid": 11, "argv": ["y"], "log": "m"}


def test_a_supervisor_never_recreates_the_state_file_of_a_stopped_cluster(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    write_state(state, {"controller": {"pid": 10}})
    sup.remove_state(state)
    assert not sup.record_status(state, "controller", 10, Status(sup.STOPPED, 0))
    assert not state.exists()
    sup.mark_ready(state, "controller")
    assert not state.exists()


def test_ready_is_what_allows_restarts(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    write_state(state, {"controller": {"pid": 10}})
    assert not sup.is_ready(state, "controller", 10)
    sup.mark_ready(state, "controller")
    assert sup.is_ready(state, "controller", 10)
    assert not sup.is_ready(state, "controller", 11)  # a stale supervisor of an earlier cluster


def test_locked_state_writes_nothing_when_the_block_fails(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with sup.locked_state(state, create=True) as data:
        assert data == {}
        data["ports"] = {"etcd": 1}
    with pytest.raises(RuntimeError), sup.locked_state(state) as data:
        assert data is not None
        data["ports"] = {"etcd": 2}
        raise RuntimeError("half-way")
    assert json.loads(state.read_text()) == {"ports": {"etcd": 1}}
    with sup.locked_state(tmp_path / "absent.json") as missing:
        assert missing is None
    assert not (tmp_path / "absent.json").exists()


def test_supervised_component_reads_the_entry_status_shows() -> None:
    entry = {"pid": 1, "state": "back-off", "restarts": 3, "child_pid": None, "last_exit_code": -9}
    assert sup.SupervisedComponent.from_entry(entry) == sup.SupervisedComponent("back-off", 3, None, -9)
    assert sup.SupervisedComponent.from_entry({"pid": 1, "argv": ["etcd"]}) is None


def test_supervise_command_runs_the_component_after_a_double_dash(tmp_path: Path) -> None:
    argv = sup.supervise_command("controller", tmp_path / "state.json", ["/py", "-m", "provisioner.cli", "controller"])
    assert argv == [sys.executable, "-m", "localcluster.supervisor", "--name", "controller",
                    "--state-file", str(tmp_path / "state.json"), "--", "/py", "-m", "provisioner.cli", "controller"]


def test_the_supervisor_command_refuses_a_zero_back_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        sup.main(["--name", "controller", "--state-file", str(tmp_path / "state.json"),
                  "--initial-backoff", "0", "--", "true"])
    assert exit_info.value.code == 2
    assert "initial_seconds must be > 0, got 0.0" in capsys.readouterr().err
