"""Unit tests of ``groupless demo`` / ``groupless dev-cluster``'s behaviour around the cluster.

No control plane here: a fake cluster records what the demo asks of it, so these run in
milliseconds and pin down the fresh-user findings (manifests shipped in the package, checks
before any build, SIGTERM handled like Ctrl-C, options validated, cleanup after a failed step).
The same behaviours in real processes (a shell, a closed pipe, a signal) are in
``tests/integration/localcluster/``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import build, cli, demo
from localcluster.cluster import ClusterError
from localcluster.walkthrough import (
    WALKTHROUGH_FILES,
    check_walkthrough,
    embedded_walkthrough,
    load_manifest,
    shared_walkthrough_dir,
    walkthrough_source,
)
from provisioner.cli import build_parser

REPO = Path(__file__).resolve().parents[3]


# ----- the embedded walkthrough ---------------------------------------------------------
def test_embedded_walkthrough_is_the_shared_one_byte_for_byte_or_parses_on_its_own() -> None:
    embedded = embedded_walkthrough()
    kinds = [load_manifest(name, embedded)["kind"] for name in WALKTHROUGH_FILES]
    assert kinds == ["Provisioner", "Deployment", "PodDisruptionBudget", "Provisioner"]
    assert load_manifest("04-provisioner-with-expiry.yaml")["spec"]["ttlSecondsUntilExpired"] == 1800
    shared = shared_walkthrough_dir()
    if shared is not None:  # beside the clone (CI, the project's tree): the copies must not drift
        assert sorted(p.name for p in shared.glob("*.yaml")) == sorted(WALKTHROUGH_FILES)
        for name in WALKTHROUGH_FILES:
            assert (embedded / name).read_bytes() == (shared / name).read_bytes(), name
        assert walkthrough_source(prefer_shared=True) == shared
    else:
        assert walkthrough_source(prefer_shared=True) == embedded


def test_the_demo_reads_the_embedded_copy_not_the_shared_directory() -> None:
    source = walkthrough_source()
    assert Path(str(source)) == REPO / "localcluster" / "walkthrough"
    check_walkthrough(source)  # every manifest present


def test_the_embedded_manifests_are_package_data() -> None:
    text = (REPO / "pyproject.toml").read_text()
    data = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert '"localcluster" = ["walkthrough/*.yaml"]' in data


def test_missing_manifests_are_named(tmp_path: Path) -> None:
    (tmp_path / "01-provisioner.yaml").write_text(yaml.safe_dump({"kind": "Provisioner"}))
    with pytest.raises(FileNotFoundError, match=r"02-inflate-deployment\.yaml, 03-pdb\.yaml, 04-provisioner"):
        check_walkthrough(tmp_path)


# ----- checks before anything is built or started ---------------------------------------
def test_preflight_names_a_missing_go_toolchain_and_missing_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUPLESS_CACHE_DIR", str(tmp_path))  # nothing built there
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "FALLBACK_GO", tmp_path / "no-go")
    problems = demo.preflight(tmp_path)
    assert any("01-provisioner.yaml" in p and str(tmp_path) in p for p in problems), problems
    assert any("Go toolchain" in p for p in problems), problems


def test_the_demo_stops_before_building_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "preflight", lambda source=None: ["the Go toolchain is needed"])
    monkeypatch.setattr(demo, "LocalCluster", lambda *a, **k: pytest.fail("a cluster was created"))
    assert demo.run_demo("unit") == 1
    err = capsys.readouterr()
    assert "error: the Go toolchain is needed" in err.err
    assert "stopped" not in err.out + err.err


# ----- options ---------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "message"), [
    ("-5", "must be at least 1 second, got -5"),
    ("0", "must be at least 1 second, got 0"),
    ("soon", "expected a whole number of seconds, got 'soon'"),
])
def test_expiry_seconds_is_validated_by_the_parser(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["demo", "--expiry-seconds", value])
    assert exit_info.value.code == 2
    assert f"--expiry-seconds: {message}" in capsys.readouterr().err


def test_demo_and_dev_cluster_share_one_documented_default_name(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["demo"]).name == cli.DEFAULT_NAME
    assert parser.parse_args(["demo", "--expiry-seconds", "30"]).expiry_seconds == 30
    for action in ("up", "down", "env", "status"):
        assert parser.parse_args(["dev-cluster", action]).name == cli.DEFAULT_NAME
        with pytest.raises(SystemExit):
            parser.parse_args(["dev-cluster", action, "--help"])
        assert f"(default: {cli.DEFAULT_NAME}" in " ".join(capsys.readouterr().out.split())


# ----- dev-cluster env --------------------------------------------------------------------
# ----- the demo's run: signals, cleanup, messages ----------------------------------------
class FakeCluster:
    """What run_demo uses of LocalCluster, recording calls."""

    def __init__(self, tmp_path: Path, *, running: bool = False, on_up: Any = None) -> None:
        self.directory = tmp_path
        self.state_file = tmp_path / "state.json"
        self.logs = tmp_path / "logs"
        self.alive = running
        self.on_up = on_up
        self.calls: list[str] = []

    def running(self) -> bool:
        return self.alive

    def attach(self) -> FakeCluster:
        self.calls.append("attach")
        return self

    def up(self, detach: bool = False, progress: Any = None) -> None:
        self.calls.append("up")
        if self.on_up is not None:
            self.on_up(self)
        self.alive = True

    def down(self, quiet: bool = False) -> list[str]:
        self.calls.append("down")
        was = self.alive
        self.alive = False
        return ["etcd"] if was else []

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> Any:
        self.calls.append("kubectl " + " ".join(args))
        return subprocess.CompletedProcess(args, 0, "ok", "")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    box: dict[str, Any] = {"cleanups": []}
    monkeypatch.setattr(demo, "preflight", lambda source=None: [])
    monkeypatch.setattr(demo, "LocalCluster", lambda name, settings: box["cluster"])
    monkeypatch.setattr(demo, "remove_walkthrough_objects",
                        lambda cluster, say, why, timeout=120: box["cleanups"].append(why) or True)
    box["tmp"] = tmp_path
    return box


def test_sigterm_during_the_demo_gets_the_ctrl_c_teardown(
    fake: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    def terminated(cluster: FakeCluster) -> None:
        cluster.alive = True  # components started, then `kill <pid>` arrives
        os.kill(os.getpid(), signal.SIGTERM)

    fake["cluster"] = FakeCluster(fake["tmp"], on_up=terminated)
    unhandled: list[int] = []

    def outside(signum: int, frame: object) -> None:  # what SIGTERM does when the demo forgets it
        unhandled.append(signum)

    before = signal.signal(signal.SIGTERM, outside)
    try:
        assert demo.run_demo("unit") == 130
        assert signal.getsignal(signal.SIGTERM) is outside  # the handler is the demo's only while it runs
    finally:
        signal.signal(signal.SIGTERM, before)
    out = capsys.readouterr()
    assert unhandled == []
    assert fake["cluster"].calls[-1] == "down" and not fake["cluster"].alive
    assert "interrupted" in out.err and "The local cluster is stopped." in out.out


def test_a_failed_step_on_a_reused_cluster_deletes_what_the_demo_applied(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake["cluster"] = FakeCluster(fake["tmp"], running=True)

    def fails(cluster: Any, say: Any, expiry: Any, source: Any) -> bool:
        raise TimeoutError("timed out after 120s waiting for 3 inflate pods Running")

    monkeypatch.setattr(demo, "replay", fails)
    assert demo.run_demo("unit") == 1
    out = capsys.readouterr()
    assert fake["cluster"].calls[:2] == ["attach", "kubectl get --raw=/readyz"]
    assert fake["cleanups"] == ["deleting what the demo applied"]
    assert "down" not in fake["cluster"].calls  # somebody else's cluster keeps running
    assert "did not reach the expected state: timed out after 120s" in out.err
    assert "stopped" not in out.out


def test_a_cluster_stopped_from_another_shell_is_named_as_such(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake["cluster"] = FakeCluster(fake["tmp"], running=True)

    def stopped_elsewhere(cluster: FakeCluster, say: Any, expiry: Any, source: Any) -> bool:
        cluster.alive = False  # `groupless dev-cluster down` in another shell
        raise ClusterError("`kubectl get nodes` failed (exit 1): connection refused")

    monkeypatch.setattr(demo, "replay", stopped_elsewhere)
    assert demo.run_demo("unit") == 1
    err = capsys.readouterr().err
    assert "the local cluster 'unit' stopped while the demo ran" in err
    assert "connection refused" not in err
    assert fake["cleanups"] == []


def test_nothing_is_said_to_be_stopped_when_nothing_started(
    fake: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    def no_go(cluster: FakeCluster) -> None:
        raise build.BuildError("the Go toolchain (go 1.26 or later) is needed")

    fake["cluster"] = FakeCluster(fake["tmp"], on_up=no_go)
    assert demo.run_demo("unit") == 1
    out = capsys.readouterr()
    assert "error: the Go toolchain" in out.err
    assert "The local cluster is stopped." not in out.out
    assert fake["cleanups"] == []


def test_a_successful_demo_on_a_new_cluster_stops_it(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake["cluster"] = FakeCluster(fake["tmp"])
    seen: list[Any] = []
    monkeypatch.setattr(demo, "replay", lambda cluster, say, expiry, source: seen.append((expiry, source)) or True)
    assert demo.run_demo("unit", expiry_seconds=40) == 0
    assert seen == [(40, walkthrough_source())]
    assert fake["cluster"].calls == ["up", "down"]
    assert "The local cluster is stopped." in capsys.readouterr().out


# ----- leftovers ---------------------------------------------------------------------------
class LeftoverCluster:
    """A cluster holding a previous run's objects; deleting the Provisioner takes its node along."""

    def __init__(self, tmp_path: Path) -> None:
        self.objects = {"deployment/inflate", "poddisruptionbudget/inflate-pdb", "provisioners.karpenter.sh/default"}
        self.node_polls = 2  # the node outlives the delete for two polls
        self.deleted: list[str] = []
        self.tmp = tmp_path

    def log_path(self, component: str) -> Path:
        return self.tmp / f"{component}.log"

    def kubectl(self, *args: str, check: bool = True, **_: Any) -> Any:
        if args[0] == "get":
            wanted = [a for a in args[1:] if "/" in a]
            out = "\n".join(f"{a.split('/')[0]}.apps/{a.split('/')[1]}" if a.startswith("deployment") else a
                            for a in wanted if a in self.objects)
            return subprocess.CompletedProcess(args, 0, out, "")
        if args[0] == "delete":
            self.deleted.append(f"{args[1]}/{args[2]}")
            self.objects.discard(f"{args[1]}/{args[2]}")
        return subprocess.CompletedProcess(args, 0, "", "")

    def kubectl_json(self, *args: str) -> Any:
        if args[:2] == ("get", "nodes"):
            gone = "provisioners.karpenter.sh/default" not in self.objects
            if gone and self.node_polls:
                self.node_polls -= 1
            return {"items": [] if gone and not self.node_polls else [{"metadata": {"name": "ip-1"}}]}
        return {"items": [] if "deployment/inflate" not in self.objects else [{"metadata": {"name": "p"}}]}


def test_leftovers_of_an_earlier_run_are_deleted_and_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    cluster = LeftoverCluster(tmp_path)
    lines: list[str] = []
    say = demo.Narrator()
    monkeypatch.setattr(say, "say", lines.append)
    assert demo.remove_walkthrough_objects(cluster, say, "removing leftovers") is True  # type: ignore[arg-type]
    assert cluster.deleted == [f"{kind}/{name}" for kind, name in demo.WALKTHROUGH_OBJECTS]
    assert cluster.node_polls == 0 and not cluster.objects
    assert lines == ["removing leftovers: deployment.apps/inflate, poddisruptionbudget/inflate-pdb, "
                     "provisioners.karpenter.sh/default"]
    # a clean cluster: nothing deleted, nothing said
    assert demo.remove_walkthrough_objects(cluster, say, "removing leftovers") is False  # type: ignore[arg-type]
    assert len(cluster.deleted) == 4 and len(lines) == 1
