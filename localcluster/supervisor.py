"""Restart a Groupless component of the local cluster when it exits, as a kubelet restarts a container.

Why: in a cluster, the kubelet restarts a Groupless container that exits (the controller exits
on purpose when it cannot renew its leader Lease, as controller-runtime does, e.g. during a
kube-apiserver outage). The local cluster runs each component as a plain subprocess, so without
this module an exit would stop provisioning for good.

One small supervisor process per component (``python -m localcluster.supervisor``), rather than
a thread in the process that started the cluster: ``groupless dev-cluster up --detach`` returns
and leaves the cluster running with no Python process of ours behind it, and a thread would die
with that process. The supervisor leads the component's process group and starts the component
in the same group, so ``groupless dev-cluster down`` stops both with the one ``killpg`` it
already sends every component, and the component gets ``PR_SET_PDEATHSIG`` so it never outlives
its supervisor, however that dies.

Back-off (:class:`BackOff`): kubelet's CrashLoopBackOff waits 10 s, doubling to 5 min, and
forgets a container's failures once it has run for 10 min (twice the cap). A dev cluster wants
a component back within a second or two after an odd exit, and a broken one should still not
spin on the machine's two shared cores: 1 s doubling to a cap of 30 s, forgotten once the
component has run for 60 s (twice the cap, as kubelet).

A component is restarted only after it has come up once (the cluster sets ``ready`` in its
state entry when its health endpoint first answers): one that fails during ``dev-cluster up``
makes the supervisor exit with its code, so ``up`` fails at once with the component's log
instead of waiting out its start timeout.

State: the supervisor records ``child_pid``, ``restarts``, ``state`` (``running``, ``back-off``,
``stopped``, ``exited``) and ``last_exit_code`` in the component's entry of the cluster's
``state.json``, under an exclusive ``flock`` on ``state.json.lock`` (:func:`locked_state`),
shared with the cluster that writes the rest of the file. It only updates an entry whose
``pid`` is its own, and never creates the file, so a cluster torn down or started anew is left
alone. Its messages go to stdout, which is the component's log file.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

#: The ``state`` values a supervisor records.
RUNNING = "running"
BACK_OFF = "back-off"
STOPPED = "stopped"
EXITED = "exited"

#: The exit code recorded when the component's executable cannot be started (as a shell's 127).
LAUNCH_FAILED = 127


@dataclass(frozen=True)
class BackOff:
    """Seconds to wait before restarting a component that exited: ``initial * factor**(n-1)``, capped.

    ``n`` counts the consecutive failures of a crash loop; a run of at least
    ``reset_after_seconds`` ends the loop, so the next exit waits ``initial_seconds`` again.
    """

    initial_seconds: float = 1.0
    factor: float = 2.0
    max_seconds: float = 30.0
    reset_after_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.initial_seconds <= 0:
            raise ValueError(f"initial_seconds must be > 0, got {self.initial_seconds}")
        if self.factor < 1:
            raise ValueError(f"factor must be >= 1, got {self.factor}")
        if self.max_seconds < self.initial_seconds:
            raise ValueError(f"max_seconds ({self.max_seconds}) must be >= initial_seconds ({self.initial_seconds})")
        if self.reset_after_seconds <= 0:
            raise ValueError(f"reset_after_seconds must be > 0, got {self.reset_after_seconds}")

    def delay(self, failures: int) -> float:
        """Seconds before the restart that follows the ``failures``-th consecutive failure (>= 1)."""
        if failures < 1:
            raise ValueError(f"failures must be >= 1, got {failures}")
        # min() before the power would overflow a float after ~1000 failures
        exponent = min(failures - 1, 64)
        return float(min(self.max_seconds, self.initial_seconds * self.factor ** exponent))


class Process(Protocol):
    """A started component: what :class:`subprocess.Popen` offers and the supervisor uses."""

    @property
    def pid(self) -> int: ...

    def wait(self) -> int:
        """Block until the process exits; its exit code (``-N`` when killed by signal ``N``)."""
        ...

    def send_signal(self, sig: int) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; may return early when the supervisor is stopped (a signal arrived)."""
        ...


@dataclass(frozen=True)
class Status:
    """What a supervisor reports about its component after each change."""

    state: str
    restarts: int
    child_pid: int | None = None
    last_exit_code: int | None = None


def describe_exit(code: int) -> str:
    """``"exit code 1"``, ``"killed by SIGKILL"`` (Popen's negative codes), ``"could not be started"``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code == LAUNCH_FAILED:
        return f"exit code {code} (not started or command not found)"
    return f"exit code {code}"


def exit_status(code: int) -> int:
    """The supervisor's own exit status for a component exit ``code``: ``128 + N`` for signal ``N``, as shells."""
    return 128 - code if code < 0 else code


class Supervisor:
    """Start a component, restart it with :class:`BackOff` each time it exits, until :meth:`stop`.

    ``launch`` starts the component (raises OSError when it cannot); ``may_restart`` says whether
    an exit may be followed by a restart (the local cluster: once the component has been ready);
    ``report`` receives a :class:`Status` at every change; ``log`` one line of text per event.
    """

    def __init__(
        self,
        name: str,
        launch: Callable[[], Process],
        *,
        clock: Clock,
        backoff: BackOff | None = None,
        may_restart: Callable[[], bool] = lambda: True,
        report: Callable[[Status], None] = lambda status: None,
        log: Callable[[str], None] = print,
    ):
        self.name = name
        self.restarts = 0
        self._launch = launch
        self._clock = clock
        self._backoff = backoff or BackOff()
        self._may_restart = may_restart
        self._report = report
        self._log = log
        self._stopping = False
        self._process: Process | None = None
        self._failures = 0

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Restart no more and send ``sig`` to the running component; safe to call from a signal handler."""
        self._stopping = True
        process = self._process
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)

    def run(self) -> int:
        """Supervise until stopped, or until an exit that ``may_restart`` refuses; the last exit code."""
        code = 0
        while not self._stopping:
            started = self._clock.monotonic()
            try:
                self._process = self._launch()
            except OSError as error:
                self._log(f"{self.name} could not be started: {error}")
                code = LAUNCH_FAILED
            else:
                if self._stopping:  # stop() ran while the component was being started
                    self.stop()
                if self.restarts:
                    self._log(f"{self.name} restarted (restart {self.restarts}), pid {self._process.pid}")
                self._report(Status(RUNNING, self.restarts, self._process.pid, code if self.restarts else None))
                code = self._process.wait()
            ran = self._clock.monotonic() - started
            if self._stopping:
                break
            if not self._may_restart():
                self._log(f"{self.name} exited ({describe_exit(code)}) after {ran:.1f} s, before it was ready: "
                          "not restarting")
                self._report(Status(EXITED, self.restarts, None, code))
                return code
            self._failures = 1 if ran >= self._backoff.reset_after_seconds else self._failures + 1
            delay = self._backoff.delay(self._failures)
            self._log(f"{self.name} exited ({describe_exit(code)}) after {ran:.1f} s; restart {self.restarts + 1} "
                      f"in {delay:g} s (back-off: failure {self._failures} in a row)")
            self._report(Status(BACK_OFF, self.restarts, None, code))
            self._clock.sleep(delay)
            if self._stopping:
                break
            self.restarts += 1
        self._report(Status(STOPPED, self.restarts, None, code))
        return code


# ----- the state file, shared with localcluster.cluster ------------------------------------
def _lock_path(state_file: Path) -> Path:
    return state_file.with_name(state_file.name + ".lock")


@contextlib.contextmanager
def locked_state(state_file: Path, *, create: bool = False) -> Iterator[dict[str, Any] | None]:
    """The parsed ``state_file`` under an exclusive lock, written back (atomically) when the block ends.

    Yields None when the file does not exist, unless ``create`` (then ``{}``). Nothing is written
    when the block raises or the file was None. The lock is an ``flock`` on ``<state_file>.lock``:
    one holder per open file, so a process must not nest two of these blocks.
    """
    if create:
        state_file.parent.mkdir(parents=True, exist_ok=True)
    elif not state_file.parent.is_dir():  # no cluster directory: nothing to read or lock
        yield None
        return
    with open(_lock_path(state_file), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state: dict[str, Any] | None
        try:
            state = json.loads(state_file.read_text())
        except FileNotFoundError:
            state = {} if create else None
        yield state
        if state is not None:
            tmp = state_file.with_name(state_file.name + ".tmp")
            tmp.write_text(json.dumps(state, indent=2))
            tmp.replace(state_file)


def remove_state(state_file: Path) -> None:
    """Delete ``state_file`` under its lock (so no supervisor writes it back afterwards)."""
    if not state_file.parent.exists():
        return
    with open(_lock_path(state_file), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            state_file.unlink()


def read_state(state_file: Path) -> dict[str, Any] | None:
    """The parsed state file (None when absent), read under its lock."""
    with locked_state(state_file) as state:
        return None if state is None else dict(state)


def _own_entry(state: dict[str, Any] | None, name: str, pid: int) -> dict[str, Any] | None:
    entry = ((state or {}).get("components") or {}).get(name)
    return entry if isinstance(entry, dict) and entry.get("pid") == pid else None


def record_status(state_file: Path, name: str, pid: int, status: Status) -> bool:
    """Write ``status`` into the entry ``name`` of the state file if its ``pid`` is ``pid``; whether it did."""
    with locked_state(state_file) as state:
        entry = _own_entry(state, name, pid)
        if entry is None:
            return False
        entry.update(state=status.state, restarts=status.restarts, child_pid=status.child_pid,
                     last_exit_code=status.last_exit_code)
        return True


def mark_ready(state_file: Path, name: str) -> None:
    """Note that component ``name`` came up once: from now on its supervisor restarts it when it exits."""
    with locked_state(state_file) as state:
        entry = ((state or {}).get("components") or {}).get(name)
        if isinstance(entry, dict):
            entry["ready"] = True


def is_ready(state_file: Path, name: str, pid: int) -> bool:
    """Whether the entry ``name`` (supervised by ``pid``) has been marked ready."""
    with locked_state(state_file) as state:
        entry = _own_entry(state, name, pid)
        return bool(entry and entry.get("ready"))


@dataclass(frozen=True)
class SupervisedComponent:
    """A supervised component as its state entry describes it (``groupless dev-cluster status``)."""

    state: str
    restarts: int
    child_pid: int | None
    last_exit_code: int | None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> SupervisedComponent | None:
        """None for a component that has no supervisor (the entry has no ``state``)."""
        if "state" not in entry:
            return None
        child = entry.get("child_pid")
        code = entry.get("last_exit_code")
        return cls(str(entry["state"]), int(entry.get("restarts") or 0),
                   int(child) if child is not None else None, int(code) if code is not None else None)


def supervise_command(name: str, state_file: Path, argv: Sequence[str],
                      python: str = sys.executable) -> list[str]:
    """The command line that runs ``argv`` as component ``name`` under a supervisor."""
    return [python, "-m", "localcluster.supervisor", "--name", name, "--state-file", str(state_file), "--", *argv]


# ----- the real process -----------------------------------------------------------------
def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``PR_SET_PDEATHSIG`` = SIGKILL: the calling process is killed when its parent exits."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class SignalClock:
    """``time.monotonic``, and a sleep that a handled signal ends early (``signal.set_wakeup_fd``)."""

    def __init__(self) -> None:
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        ready, _, _ = select.select([self._read], [], [], seconds)
        if ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._read, 512)


def _launcher(argv: Sequence[str]) -> Callable[[], Process]:
    def launch() -> Process:
        # stdout/stderr inherited: the component writes to the log file the supervisor writes to
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)  # noqa: S603, PLW1509

    return launch


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} supervisor: {message}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localcluster.supervisor",
        description="Run a command and restart it with back-off when it exits, recording restarts in the "
        "local cluster's state file. SIGTERM/SIGINT/SIGHUP stop it (and are passed to the command).",
    )
    parser.add_argument("--name", required=True, help="the component's name: its entry in the state file")
    parser.add_argument("--state-file", required=True, type=Path, help="the local cluster's state.json")
    defaults = BackOff()
    parser.add_argument("--initial-backoff", type=float, default=defaults.initial_seconds, metavar="SECONDS")
    parser.add_argument("--max-backoff", type=float, default=defaults.max_seconds, metavar="SECONDS")
    parser.add_argument("--reset-after", type=float, default=defaults.reset_after_seconds, metavar="SECONDS",
                        help="a run this long forgets earlier failures")
    parser.add_argument("command", nargs="+", help="the component's command line (after --)")
    args = parser.parse_args(argv)
    try:
        backoff = BackOff(args.initial_backoff, 2.0, args.max_backoff, args.reset_after)
    except ValueError as error:
        parser.error(str(error))
    pid = os.getpid()

    def report(status: Status) -> None:
        record_status(args.state_file, args.name, pid, status)

    supervisor = Supervisor(
        args.name, _launcher(args.command), clock=SignalClock(), backoff=backoff,
        may_restart=lambda: is_ready(args.state_file, args.name, pid), report=report, log=_log,
    )

    def on_signal(signum: int, frame: object) -> None:
        supervisor.stop(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    return exit_status(supervisor.run())


if __name__ == "__main__":
    sys.exit(main())
