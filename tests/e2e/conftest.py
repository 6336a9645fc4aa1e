"""The e2e tier: one real local control plane per test session (``localcluster``).

A test that cannot get its cluster FAILS with the reason (Go missing, a component that did
not start and the tail of its log): CI must never pass by skipping the real thing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.build import BuildError
from localcluster.cluster import ClusterError, LocalCluster, Settings

#: Seconds per e2e test, instead of the 60 s default of the other tiers: the suite's budget from
#: before per-tier timeouts. The longest tests give the cluster up to 10-15 min of waits in the
#: worst case: the burst (300 s for 200 pods Running, 120 s for them to go, 180 s for the nodes),
#: the replacement drain (pods Running, expiry, a drain the PDB holds for over a minute, clean-up)
#: and the demo's replay (five steps, each waiting up to 120-180 s). The first test also pays
#: for the start of the cluster the whole test run shares.
E2E_TIMEOUT_SECONDS = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))


_failure: str | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the control plane's binaries before any test runs, outside per-test timeouts.

    A cold build takes 5-40 minutes (Go module downloads, then compiling Kubernetes); inside a
    fixture it would count against the first test's timeout. Progress goes to the terminal.
    """
    global _failure
    here = Path(__file__).parent
    if session.config.option.collectonly or not any(
        here in Path(str(item.fspath)).parents for item in session.items
    ):
        return
    from localcluster import build

    capture = session.config.pluginmanager.getplugin("capturemanager")
    started = time.monotonic()
    try:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if not build.binaries().complete:
                print(f"\n[e2e] building the local control plane into {build.binaries().directory}",
                      file=sys.stderr, flush=True)
            build.build()
    except BuildError as error:
        _failure = f"the local control plane's binaries could not be built: {error}"
        return
    if time.monotonic() - started > 5:
        print(f"[e2e] control plane built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """A running local cluster (Groupless included when installed), stopped once the test run ends (pytest session scope)."""
    global _failure
    if _failure:
        pytest.fail(_failure, pytrace=False)
    name = os.environ.get("GROUPLESS_E2E_CLUSTER", "e2e")
    local = LocalCluster(name, Settings())
    if local.running():
        # another session (a colleague's, a `--keep`) uses it: never stop it, start our own
        local = LocalCluster(f"{name}-{os.getpid()}", Settings())
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
        if local.name != name:  # a pid-named cluster: nobody will look for its directory again
            shutil.rmtree(local.directory, ignore_errors=True)


@contextlib.contextmanager
def module_cluster(suffix: str, settings: Settings) -> Iterator[LocalCluster]:
    """A local cluster of its own for one test module (``<e2e cluster name>-<suffix>``), stopped afterwards.

    When a cluster of that name is running (someone else's), another one named after this
    process is started instead, and its directory removed at the end. A cluster that cannot
    start fails the test with the reason.
    """
    name = os.environ.get("GROUPLESS_E2E_CLUSTER", "e2e") + f"-{suffix}"
    local = LocalCluster(name, settings)
    if local.running():  # someone else's: never stop it, start our own
        local = LocalCluster(f"{name}-{os.getpid()}", settings)
    started = time.monotonic()
    try:
        local.up(progress=lambda m: print(f"[e2e {suffix} cluster {time.monotonic() - started:5.1f}s] {m}",
                                          file=sys.stderr, flush=True))
    except (BuildError, ClusterError) as error:
        pytest.fail(f"the local control plane ({suffix}) could not start: {error}", pytrace=False)
    try:
        yield local
    finally:
        local.down(quiet=True)
        if local.name != name:
            shutil.rmtree(local.directory, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On a failed e2e test, attach the tail of the Groupless logs (what CI readers need first)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    local = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and isinstance(local, LocalCluster):
        from localcluster.cluster import tail

        for component in ("controller", "extender", "webhook"):
            text = tail(local.log_path(component), 40)
            if text:
                report.sections.append((f"{component} log (last 40 lines)", text))
