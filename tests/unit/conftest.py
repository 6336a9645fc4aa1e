"""The unit tier's rule, enforced: a unit test opens no network socket and starts no process.

Every test under ``tests/unit`` runs with these refused (the call raises :class:`UnitTierError`,
and the test fails at teardown even if the code under test swallowed the error):

* ``socket.socket.connect``, ``connect_ex``, ``bind`` and ``sendto`` on any family but
  ``AF_UNIX`` (loopback servers and clients, HTTP, DNS over UDP);
* ``subprocess.Popen`` (so ``subprocess.run`` and ``check_output`` too), ``os.system``,
  ``os.fork``, ``os.posix_spawn`` and ``os.posix_spawnp``.

Patching a few attributes per test costs microseconds.

A test that needs a server, a process, moto, helm or the Go toolchain belongs in
``tests/integration/<concept>/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# urllib3 probes for IPv6 support by binding a socket to ::1 when it is first imported (boto3 and
# requests import it); import it here, before the guard, so that probe is not taken for a test's
# network use.
import urllib3.util.connection  # noqa: F401  (imported for its import-time probe)


class UnitTierError(RuntimeError):
    """A unit test reached for the network or a process."""


CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """Remember whether the test itself failed, so a refusal it already shows is not reported twice."""
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


@pytest.fixture(autouse=True)
def no_network_no_processes(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    refused: list[str] = []

    def refuse(what: str) -> UnitTierError:
        message = (f"{request.node.nodeid}: {what}; unit tests open no network socket and start no process "
                   "(move the test to tests/integration/)")
        refused.append(message)
        return UnitTierError(message)

    def guard_socket(name: str) -> None:
        real: Callable[..., Any] = getattr(socket.socket, name)

        def guarded(self: socket.socket, *args: Any) -> Any:
            if self.family != socket.AF_UNIX:
                raise refuse(f"socket.{name}{args!r} on {self.family!r}")
            return real(self, *args)

        monkeypatch.setattr(socket.socket, name, guarded)

    def guard_call(owner: Any, name: str) -> None:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            raise refuse(f"{owner.__name__}.{name}{args[:2]!r}")

        monkeypatch.setattr(owner, name, guarded)

    for name in ("connect", "connect_ex", "bind", "sendto"):
        guard_socket(name)

    def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        self._child_created = False  # what Popen.__del__ reads of a Popen that never started
        raise refuse(f"subprocess.Popen({args!r})")

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    for name in ("system", "fork", "posix_spawn", "posix_spawnp"):
        guard_call(os, name)

    yield
    if refused and not request.node.stash.get(CALL_FAILED, False):
        pytest.fail("\n".join(refused), pytrace=False)
