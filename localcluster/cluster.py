"""A real Kubernetes control plane on loopback, without a container runtime.

Why real components rather than fakes: everything Groupless promises happens between them --
kube-apiserver calling our admission webhooks, kube-scheduler calling our extender,
kube-controller-manager running Deployments and computing PodDisruptionBudget status, the
Eviction API enforcing it. Only the kubelet is simulated, by kwok, and only for the nodes
Groupless creates (annotated ``kwok.x-k8s.io/node: fake``); EC2 and SSM are a seeded moto
server, or, with ``Settings(cloud_provider="kwok")``, there is no EC2 at all: the controller
runs the kwok cloud provider, whose instances are those Nodes, and moto is not started.

Each component is a subprocess in its own process group on a free 127.0.0.1 port, waited for
on its health endpoint, with its log in ``<cluster dir>/logs/<component>.log``. The state file
``<cluster dir>/state.json`` records ports and process groups so that ``groupless dev-cluster
down`` works from another shell; ``down`` stops every group (SIGTERM, then SIGKILL), so no
process is left behind. In the foreground (tests, ``groupless demo``) each component also gets
``PR_SET_PDEATHSIG`` so that it dies with its parent even if the parent is killed hard.
Groupless's own processes (webhook, extender, controller) run under a supervisor
(:mod:`localcluster.supervisor`) that restarts them with back-off when they exit, as a kubelet
would, and records their restart counts in the state file.

Start order (each one waited for before the next): etcd, kube-apiserver, kube-controller-manager,
moto (with the aws cloud provider), kwok, then Groupless's webhook (its CRD applied first and its
webhook configurations registered after it answers), extender, kube-scheduler (its configuration
points at the extender), and the controller. Groupless processes are started as ``python -m provisioner.cli
<subcommand>`` from the interpreter running this code, so they use the same installation.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localcluster import build, pki, supervisor
from localcluster.ports import free_port
from provisioner import yamlload

REPO_ROOT = Path(__file__).resolve().parent.parent
DEPLOY_DIR = REPO_ROOT / "deploy"
KWOK_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
#: kwok's options (workers per queue): ``localcluster/kwok-config.yaml``.
KWOK_CONFIG = Path(__file__).resolve().parent / "kwok-config.yaml"
#: kwok's node leases: renewed every quarter of this. Long enough that a thousand Nodes cost kwok
#: and the API server little (a renewal each 30 s), with kube-controller-manager's grace periods
#: (``NODE_MONITOR_GRACE``, ``NODE_STARTUP_GRACE``) set to outlast a few missed renewals.
KWOK_NODE_LEASE_SECONDS = 120
NODE_MONITOR_GRACE = "240s"
NODE_STARTUP_GRACE = "300s"

#: kube-controller-manager's controllers: all but the TTL controller, which writes the annotation
#: ``node.alpha.kubernetes.io/ttl`` (how long kubelets cache Secrets and ConfigMaps) on every Node
#: and writes every Node again when the cluster crosses a size bucket (100, 500, 1,000 nodes...):
#: 1-2 writes a Node on a 750-node burst, read by no kubelet here (kwok plays them).
CONTROLLER_MANAGER_CONTROLLERS = "*,-ttl-controller"

#: The annotation kwok selects the nodes it simulates by; Groupless puts it on the Nodes it creates.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

#: The controller's cloud providers a local cluster can run (``Settings.cloud_provider``).
CLOUD_PROVIDERS = ("aws", "kwok")

#: The walkthrough's account, as ``localcluster.aws.seed_account`` seeds it.
AWS_REGION = "ap-south-1"
CLUSTER_NAME = "karpenter-demo"
DEFAULT_INSTANCE_PROFILE = "KarpenterNodeInstanceProfile-karpenter-demo"


class ClusterError(RuntimeError):
    """A component did not start or became unhealthy; the message names it and its log."""


@dataclass(frozen=True)
class Settings:
    """Tunables of a local cluster. The defaults are the fast settings tests and the demo use."""

    #: Groupless's provisioning batch windows (seconds): idle and maximum, as in Karpenter.
    batch_idle_seconds: float = 1.0
    batch_max_seconds: float = 10.0
    #: Start Groupless's own processes (webhook, extender, controller) when they are installed.
    groupless: bool = True
    #: Seconds to wait for each component's health endpoint.
    start_timeout: float = 180.0
    #: Extra environment for the controller (``GROUPLESS_*`` overrides).
    controller_env: Mapping[str, str] = field(default_factory=dict)
    log_level: str = "info"
    #: The controller's cloud provider: ``aws`` (EC2 and SSM on a seeded moto server) or
    #: ``kwok`` (instances are kwok Nodes, no moto; ``provisioner.cloudprovider.kwok``).
    cloud_provider: str = "aws"
    #: kube-scheduler's ``--feature-gates`` (none by default). ``SchedulerAsyncAPICalls``
    #: (beta, off by default since 1.35.1) sends a pod's status PATCH after an unschedulable
    #: attempt without holding the scheduling loop; tried on the 1,000-pod burst of
    #: ``benchmarks/scale_out.py`` on this shared 2-core machine, it sent PATCHes faster than the
    #: CPU-starved API server answered them: 1,566 timed out (504) and no pod ran in 150 s.
    scheduler_feature_gates: Mapping[str, bool] = field(default_factory=dict)
    #: kube-scheduler's ``percentageOfNodesToScore`` (None: ``deploy/scheduler``'s, 100; 0: its
    #: adaptive default, 5-50 % of the nodes found feasible, at least 100). 100 makes every
    #: attempt see the node launched for a pod: on the 1,000-pod burst of
    #: ``benchmarks/scale_out.py`` (286 nodes) 662 failed attempts instead of 1,414 and all
    #: Running in 59.4 s instead of 68.7 s.
    percentage_of_nodes_to_score: int | None = None
    #: Start Groupless's controller (with ``groupless``). False: the webhook and the extender run
    #: but nothing is launched on its own (the differential test launches the plan itself).
    controller: bool = True


def cache_dir() -> Path:
    return build.cache_dir()


def cluster_dir(name: str) -> Path:
    """``$GROUPLESS_CACHE_DIR/clusters/<name>`` (default ``~/.cache/groupless/clusters/<name>``)."""
    return cache_dir() / "clusters" / name


def available_subcommands() -> set[str]:
    """The ``groupless`` subcommands registered in this installation (parts land independently)."""
    from provisioner.cli import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


_set_pdeathsig = supervisor.die_with_parent


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is dead for our purposes
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def stop_process_group(pgid: int, executable: str, timeout: float = 10.0) -> bool:
    """SIGTERM the process group ``pgid`` (led by ``executable``), SIGKILL it after ``timeout``.

    Returns False when the group was already gone. The leader's command line is checked against
    ``executable`` so a recycled pid of some unrelated process is never signalled.
    """
    if not _process_alive(pgid):
        return False
    argv = _cmdline(pgid)
    if argv and executable and executable not in argv[:3]:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _process_alive(pgid):
            break
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)  # stragglers of the group (gunicorn workers, ...)
    return True


@dataclass
class Component:
    """One running subprocess of the cluster."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    #: Run under localcluster.supervisor (``argv`` is then the supervisor's command line).
    supervised: bool = False

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


class LocalCluster:
    """A local control plane rooted at ``cluster_dir(name)``.

    Use as a context manager (``with LocalCluster("demo") as cluster: ...``) or call
    :meth:`up` / :meth:`down`. :meth:`attach` reconnects to a cluster started by another process.
    """

    def __init__(self, name: str = "default", settings: Settings | None = None, directory: Path | None = None):
        self.name = name
        self.settings = settings or Settings()
        self.directory = directory or cluster_dir(name)
        self.binaries = build.binaries()
        self.components: list[Component] = []
        self.ports: dict[str, int] = {}
        self.started_seconds: float | None = None
        self._tie_to_parent = True
        self.aws_account: dict[str, Any] | None = None

    # ----- paths --------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def pki_dir(self) -> Path:
        return self.directory / "pki"

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def aws_endpoint_url(self) -> str | None:
        port = self.ports.get("moto")
        return f"http://127.0.0.1:{port}" if port else None

    def log_path(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def env(self) -> dict[str, str]:
        """Environment variables a shell needs to use this cluster (``KUBECONFIG``, ``PATH``, AWS)."""
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.binaries.directory}:{os.environ.get('PATH', '')}",
        }
        if self.aws_endpoint_url:
            env.update(
                AWS_ENDPOINT_URL=self.aws_endpoint_url, AWS_REGION=AWS_REGION, AWS_DEFAULT_REGION=AWS_REGION,
                AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
            )
        return env

    # ----- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def running(self) -> bool:
        """True when a state file exists and every recorded process group is alive."""
        if not self.state_file.exists():
            return False
        state = json.loads(self.state_file.read_text())
        return bool(state.get("components")) and all(
            _process_alive(c["pgid"]) for c in state["components"].values()
        )

    def attach(self) -> LocalCluster:
        """Load ports and component list of a cluster started elsewhere (from ``state.json``)."""
        if not self.state_file.exists():
            raise ClusterError(f"no local cluster {self.name!r} is running (no {self.state_file})")
        state = json.loads(self.state_file.read_text())
        self.ports = {k: int(v) for k, v in state["ports"].items()}
        self.pki = pki.create_cluster_pki(self.pki_dir)
        self.components = [
            Component(name, c["argv"], Path(c["log"])) for name, c in state["components"].items()
        ]
        return self

    def up(self, *, detach: bool = False, progress: Callable[[str], None] | None = None) -> None:
        """Build the binaries if needed and start every component; raises ClusterError on failure.

        ``detach=True`` leaves the processes running after this Python process exits (for
        ``groupless dev-cluster up --detach``); otherwise they die with it. Whatever started is
        stopped again when a later component fails or on KeyboardInterrupt.
        """
        say = progress or (lambda message: None)
        if self.settings.cloud_provider not in CLOUD_PROVIDERS:
            raise ClusterError(f"cloud provider {self.settings.cloud_provider!r}: expected one of "
                               f"{', '.join(CLOUD_PROVIDERS)}")
        self._tie_to_parent = not detach
        if self.running():
            raise ClusterError(
                f"local cluster {self.name!r} is already running; `groupless dev-cluster down --name {self.name}` first"
            )
        self.down(quiet=True)  # leftovers of a crashed run
        say("building / locating binaries")
        self.binaries = build.build()
        started = time.monotonic()
        for stale in ("etcd", "logs", "state.json", "scheduler", "webhooks"):
            path = self.directory / stale
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pki = pki.create_cluster_pki(self.pki_dir)
        self.ports = {
            name: free_port()
            for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok",
                         "moto", "webhook", "extender", "controller-metrics")
        }
        self._write_kubeconfig()
        try:
            self._start_all(say)
        except BaseException:
            self.down(quiet=True)
            raise
        self.started_seconds = time.monotonic() - started
        say(f"cluster {self.name!r} is up in {self.started_seconds:.1f}s")

    def _start_all(self, say: Callable[[str], None]) -> None:
        s = self.settings
        self._start_etcd()
        say("etcd is healthy")
        self._start_apiserver()
        say(f"kube-apiserver is ready at {self.apiserver_url}")
        self._start_controller_manager()
        say("kube-controller-manager is healthy")
        subcommands = available_subcommands() if s.groupless else set()
        if s.groupless and s.cloud_provider == "aws" and _aws_module_available():
            self._start_moto()
            say(f"moto (EC2/SSM) is serving at {self.aws_endpoint_url}")
        else:
            self.ports.pop("moto", None)
        self._start_kwok()
        say("kwok is healthy")
        if "webhook" in subcommands:
            self._apply_crds()
            self._start_webhook()
            self._register_webhooks()
            say("Groupless webhook is serving and registered")
        extender = "extender" in subcommands
        if extender:
            self._start_extender()
            say("Groupless extender is serving")
        self._start_scheduler(with_extender=extender)
        say("kube-scheduler is healthy" + (" (with the Groupless extender)" if extender else ""))
        if s.controller and "controller" in subcommands and (self.aws_endpoint_url or s.cloud_provider == "kwok"):
            self._start_controller()
            say("Groupless controller is running")
        self._wait_default_service_account()

    def down(self, quiet: bool = False) -> list[str]:
        """Stop every process group recorded in the state file (reverse start order).

        Returns the names of the components that were stopped. Safe to call repeatedly and
        from another process than the one that started the cluster.
        """
        stopped: list[str] = []
        # our own children first (covers a failure before the state file was written)
        for component in reversed(self.components):
            if component.process is not None and component.process.poll() is None:
                stop_process_group(component.process.pid, component.argv[0])
                with contextlib.suppress(subprocess.TimeoutExpired):
                    component.process.wait(timeout=5)
                stopped.append(component.name)
        if self.state_file.exists():
            with contextlib.suppress(ValueError, OSError):
                state = json.loads(self.state_file.read_text())
                for name, entry in reversed(list(state.get("components", {}).items())):
                    if name not in stopped and stop_process_group(int(entry["pgid"]), entry["argv"][0]):
                        stopped.append(name)
            supervisor.remove_state(self.state_file)
        self.components = []
        if stopped and not quiet:
            print(f"stopped {', '.join(stopped)}", file=sys.stderr)
        return stopped

    # ----- one component at a time (fault tests) ----------------------------------------
    def child_pid(self, name: str) -> int | None:
        """The pid of a supervised component's own process (not its supervisor's), from the state file."""
        state = supervisor.read_state(self.state_file) or {}
        entry = (state.get("components") or {}).get(name) or {}
        child = entry.get("child_pid")
        return int(child) if child else None

    def stop_component(self, name: str, *, kill: bool = False) -> None:
        """Stop component ``name`` and keep it stopped until :meth:`start_component` (ClusterError when unknown).

        Its whole process group goes, so a supervised component is not restarted. ``kill``:
        SIGKILL at once (a crash), instead of SIGTERM and SIGKILL 10 s later.
        """
        found = [c for c in self.components if c.name == name and c.process is not None]
        if not found:
            raise ClusterError(f"no component {name!r} of cluster {self.name!r} runs from this process")
        for component in found:
            assert component.process is not None
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(component.process.pid, signal.SIGKILL)
            else:
                stop_process_group(component.process.pid, component.argv[0])
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(timeout=10)
        self.components = [c for c in self.components if c not in found]
        with supervisor.locked_state(self.state_file) as state:
            if state is not None:
                (state.get("components") or {}).pop(name, None)

    def start_component(self, name: str, env: Mapping[str, str] | None = None) -> None:
        """Start a stopped component again on its ports and wait until it answers; ClusterError otherwise.

        ``kube-apiserver``, ``webhook``, ``extender`` or a controller: ``controller``, or another
        replica ``controller-<suffix>`` (its own metrics port, the same Lease: a standby).
        ``env``: extra ``GROUPLESS_*`` variables of a controller (the EC2 endpoint of a fault proxy).
        """
        if any(c.name == name and c.process is not None and c.process.poll() is None for c in self.components):
            raise ClusterError(f"component {name!r} of cluster {self.name!r} is already running")
        starters: dict[str, Callable[[], None]] = {
            "kube-apiserver": self._start_apiserver, "webhook": self._start_webhook, "extender": self._start_extender,
        }
        if name in starters:
            starters[name]()
        elif name == "controller" or name.startswith("controller-"):
            self._start_controller(name, env)
        else:
            raise ClusterError(f"cannot start component {name!r}: expected kube-apiserver, webhook, extender "
                               "or controller[-<suffix>]")

    # ----- process plumbing ---------------------------------------------------------------
    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
               supervised: bool = False) -> Component:
        log = self.log_path(name)
        if supervised:
            argv = supervisor.supervise_command(name, self.state_file, argv)
        # under the state file's lock: a supervisor's first report waits until its entry exists
        with supervisor.locked_state(self.state_file, create=True) as state, log.open("ab") as handle:
            process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # own process group: `down` kills the whole group
                preexec_fn=_set_pdeathsig if self._tie_to_parent else None,  # noqa: PLW1509
            )
            component = Component(name, list(argv), log, process, supervised)
            self.components.append(component)
            assert state is not None
            self._save_state(state)
        return component

    def _save_state(self, state: dict[str, Any]) -> None:
        """Fill ``state`` (the file's content, under its lock) with ports and components.

        What supervisors recorded in their entries (restarts, child pid, ...) is kept.
        """
        recorded = state.get("components") or {}
        state.update({
            "name": self.name,
            "ports": self.ports,
            "kubeconfig": str(self.kubeconfig),
            "components": {
                c.name: {**recorded.get(c.name, {}), "pid": c.pid, "pgid": c.pid, "argv": c.argv, "log": str(c.log)}
                for c in self.components if c.process is not None
            },
        })

    def _wait(self, component: Component, probe: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.settings.start_timeout
        while time.monotonic() < deadline:
            if component.process is not None and component.process.poll() is not None:
                raise ClusterError(
                    f"{component.name} exited with code {component.process.returncode} before {what}; "
                    f"last lines of {component.log}:\n{tail(component.log)}"
                )
            with contextlib.suppress(OSError, ssl.SSLError, urllib.error.URLError, ValueError):
                if probe():
                    break
            time.sleep(0.2)
        else:
            raise ClusterError(
                f"{component.name} did not become ready ({what}) within {self.settings.start_timeout:.0f}s; "
                f"last lines of {component.log}:\n{tail(component.log)}"
            )
        if component.supervised:
            supervisor.mark_ready(self.state_file, component.name)  # from now on, an exit means a restart

    def _https_ok(self, url: str, client_cert: bool = True, verify: bool = True) -> bool:
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert)) if verify else ssl._create_unverified_context()
        if client_cert:
            context.load_cert_chain(str(self.pki.admin.cert), str(self.pki.admin.key))
        with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310
            return bool(response.status == 200)

    @staticmethod
    def _http_ok(url: str) -> bool:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310
            return bool(response.status == 200)

    def _bin(self, name: str) -> str:
        return str(self.binaries.path(name))

    # ----- components ---------------------------------------------------------------------
    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        component = self._spawn("etcd", [
            self._bin("etcd"), "--name=local", f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}", "--unsafe-no-fsync=true",
            "--auto-compaction-mode=periodic", "--auto-compaction-retention=5m",
            "--quota-backend-bytes=2147483648", "--log-level=warn",
        ])
        self._wait(component, lambda: self._http_ok(f"{client}/health"), f"{client}/health answers")

    def _start_apiserver(self) -> None:
        p = self.pki
        component = self._spawn("kube-apiserver", [
            self._bin("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={p.apiserver.cert}", f"--tls-private-key-file={p.apiserver.key}",
            f"--client-ca-file={p.ca.cert}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.service_account.cert}",
            f"--service-account-signing-key-file={p.service_account.key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
            "--event-ttl=2h", "--profiling=false",
            f"--cert-dir={self.pki_dir}",
        ])
        self._wait(component, lambda: self._https_ok(f"{self.apiserver_url}/readyz"), "/readyz answers ok")

    def _start_controller_manager(self) -> None:
        p = self.pki
        component = self._spawn("kube-controller-manager", [
            self._bin("kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--service-account-private-key-file={p.service_account.key}",
            f"--root-ca-file={p.ca.cert}",
            "--use-service-account-credentials=false",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['controller-manager']}",
            f"--cert-dir={self.directory / 'controller-manager'}",
            "--kube-api-qps=200", "--kube-api-burst=400",
            "--concurrent-replicaset-syncs=10", "--concurrent-deployment-syncs=10",
            f"--controllers={CONTROLLER_MANAGER_CONTROLLERS}",
            # kwok renews its leases less often than a kubelet (KWOK_NODE_LEASE_SECONDS)
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE}", f"--node-startup-grace-period={NODE_STARTUP_GRACE}",
            "--profiling=false",
        ])
        url = f"https://127.0.0.1:{self.ports['controller-manager']}/healthz"
        self._wait(component, lambda: self._https_ok(url, client_cert=False, verify=False), "/healthz answers ok")

    def _start_kwok(self) -> None:
        component = self._spawn("kwok", [
            self._bin("kwok"),
            f"--kubeconfig={self.kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
            "--cidr=10.0.0.0/16", "--node-ip=10.0.0.1",
            f"--node-lease-duration-seconds={KWOK_NODE_LEASE_SECONDS}",
            f"--config={KWOK_CONFIG}",
            f"--config={KWOK_STAGES}",
            f"--server-address=127.0.0.1:{self.ports['kwok']}",
        ])
        url = f"http://127.0.0.1:{self.ports['kwok']}/healthz"
        self._wait(component, lambda: self._http_ok(url), "/healthz answers ok")

    def _start_moto(self) -> None:
        port = self.ports["moto"]
        component = self._spawn("moto", [sys.executable, "-m", "localcluster.aws", "--port", str(port)],
                                env={"PYTHONPATH": str(REPO_ROOT)})
        self._wait(component, lambda: _json_line(component.log) is not None,
                   "it prints the seeded account (one JSON line)")
        self.aws_account = _json_line(component.log)

    def _groupless(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "provisioner.cli", *args]

    def _groupless_env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}

    def _start_webhook(self) -> None:
        port = self.ports["webhook"]
        g = self.pki.groupless
        component = self._spawn("webhook", self._groupless(
            "webhook", "--listen", f"127.0.0.1:{port}", "--tls-cert-file", str(g.cert), "--tls-key-file", str(g.key),
        ), env=self._groupless_env(), supervised=True)
        self._wait(component, lambda: self._https_ok(f"https://127.0.0.1:{port}/healthz", client_cert=False),
                   "/healthz answers ok")

    def _start_extender(self) -> None:
        port = self.ports["extender"]
        g = self.pki.groupless
        component = self._spawn("extender", self._groupless(
            "extender", "--listen", f"127.0.0.1:{port}", "--tls-cert-file", str(g.cert), "--tls-key-file", str(g.key),
            "--kubeconfig", str(self.kubeconfig),
        ), env=self._groupless_env(), supervised=True)
        self._wait(component, lambda: self._https_ok(f"https://127.0.0.1:{port}/healthz", client_cert=False),
                   "/healthz answers ok")

    def controller_environment(self) -> dict[str, str]:
        """The ``GROUPLESS_*`` environment of the controller process (fast settings)."""
        s = self.settings
        env = {
            **self._groupless_env(),
            "GROUPLESS_KUBECONFIG": str(self.kubeconfig),
            "GROUPLESS_CLUSTER_NAME": CLUSTER_NAME,
            "GROUPLESS_CLUSTER_ENDPOINT": self.apiserver_url,
            "GROUPLESS_CLUSTER_CA_BUNDLE": base64.b64encode(self.pki.ca.cert.read_bytes()).decode(),
            "GROUPLESS_CLOUD_PROVIDER": s.cloud_provider,
            "GROUPLESS_BATCH_IDLE_DURATION": str(s.batch_idle_seconds),
            "GROUPLESS_BATCH_MAX_DURATION": str(s.batch_max_seconds),
            "GROUPLESS_NODE_ANNOTATIONS": f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
            "GROUPLESS_LOG_LEVEL": s.log_level,
            "GROUPLESS_LISTEN_ADDRESS": f"127.0.0.1:{self.ports['controller-metrics']}",
            "GROUPLESS_RESYNC_PERIOD": "10",
        }
        if s.cloud_provider == "aws":
            env.update({
                "GROUPLESS_AWS_REGION": AWS_REGION,
                "GROUPLESS_AWS_ENDPOINT_URL": self.aws_endpoint_url or "",
                "GROUPLESS_DEFAULT_INSTANCE_PROFILE": DEFAULT_INSTANCE_PROFILE,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": AWS_REGION,
            })
        env.update(s.controller_env)
        return env

    def _start_controller(self, name: str = "controller", env: Mapping[str, str] | None = None) -> None:
        metrics = f"{name}-metrics"
        port = self.ports.setdefault(metrics, free_port())
        environment = {**self.controller_environment(), **(env or {}), "GROUPLESS_LISTEN_ADDRESS": f"127.0.0.1:{port}"}
        component = self._spawn(name, self._groupless("controller"), env=environment, supervised=True)
        url = f"http://127.0.0.1:{port}/healthz"
        self._wait(component, lambda: self._http_ok(url), "/healthz answers ok")

    def scheduler_config(self, with_extender: bool) -> dict[str, Any]:
        """The KubeSchedulerConfiguration: ``deploy/scheduler/`` rewritten for loopback.

        The extender's ``urlPrefix`` is pointed at ``https://127.0.0.1:<extender port>`` (keeping
        its path) and its ``tlsConfig`` trusts our CA; the client connection uses the admin
        kubeconfig; leader election is off (one scheduler); ``percentageOfNodesToScore`` is the
        settings' (see :attr:`Settings.percentage_of_nodes_to_score`).
        """
        source = DEPLOY_DIR / "scheduler" / "kube-scheduler-config.yaml"
        config: dict[str, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
        if source.exists():
            docs = [d for d in yamlload.load_all(source.read_text()) if isinstance(d, dict)]
            config = next((d for d in docs if d.get("kind") == "KubeSchedulerConfiguration"), config)
        config["clientConnection"] = {
            **(config.get("clientConnection") or {}), "kubeconfig": str(self.kubeconfig), "qps": 200, "burst": 400,
        }
        config["leaderElection"] = {"leaderElect": False}
        if self.settings.percentage_of_nodes_to_score is not None:
            config["percentageOfNodesToScore"] = self.settings.percentage_of_nodes_to_score
        extenders = []
        if with_extender:
            ca_data = base64.b64encode(self.pki.ca.cert.read_bytes()).decode()
            for extender in config.get("extenders") or []:
                prefix = str(extender.get("urlPrefix", ""))
                path = "/" + prefix.split("://", 1)[-1].split("/", 1)[1] if prefix.count("/") > 2 else ""
                extenders.append({
                    **extender,
                    "urlPrefix": f"https://127.0.0.1:{self.ports['extender']}{path.rstrip('/')}",
                    "enableHTTPS": True,
                    "tlsConfig": {"caData": ca_data},
                })
        if extenders:
            config["extenders"] = extenders
        else:
            config.pop("extenders", None)
        return config

    def scheduler_flags(self) -> list[str]:
        """kube-scheduler's flags beyond the configuration file: ``--feature-gates`` from the settings."""
        gates = self.settings.scheduler_feature_gates
        if not gates:
            return []
        return ["--feature-gates=" + ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))]

    def _start_scheduler(self, with_extender: bool) -> None:
        directory = self.directory / "scheduler"
        directory.mkdir(exist_ok=True)
        config_path = directory / "kube-scheduler-config.yaml"
        config_path.write_text(yaml.safe_dump(self.scheduler_config(with_extender), sort_keys=False))
        port = self.ports["scheduler"]
        component = self._spawn("kube-scheduler", [
            self._bin("kube-scheduler"),
            f"--config={config_path}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}",
            f"--cert-dir={directory}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            *self.scheduler_flags(),
        ])
        url = f"https://127.0.0.1:{port}/healthz"
        self._wait(component, lambda: self._https_ok(url, client_cert=False, verify=False), "/healthz answers ok")

    # ----- Groupless objects --------------------------------------------------------------
    def _apply_crds(self) -> None:
        crds = DEPLOY_DIR / "crds"
        if not crds.is_dir():
            return
        self.kubectl("apply", "-f", str(crds))  # client-side: later `kubectl apply`s of it stay quiet
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))

    def webhook_configurations(self) -> list[dict[str, Any]]:
        """The webhook configurations of ``deploy/webhooks/``, rewritten for loopback.

        Each webhook's clientConfig becomes ``url: https://127.0.0.1:<webhook port><service
        path>`` with our CA as caBundle.
        """
        source = DEPLOY_DIR / "webhooks"
        ca_bundle = base64.b64encode(self.pki.ca.cert.read_bytes()).decode()
        out: list[dict[str, Any]] = []
        files = sorted(source.glob("*.yaml")) + sorted(source.glob("*.yml")) if source.is_dir() else []
        for path in files:
            for doc in yamlload.load_all(path.read_text()):
                if not isinstance(doc, dict) or doc.get("kind") not in (
                    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
                ):
                    continue
                for webhook in doc.get("webhooks") or []:
                    client = webhook.get("clientConfig") or {}
                    path_part = (client.get("service") or {}).get("path")
                    if path_part is None and client.get("url"):
                        url = str(client["url"])
                        path_part = "/" + url.split("://", 1)[-1].split("/", 1)[1] if url.count("/") > 2 else "/"
                    webhook["clientConfig"] = {
                        "url": f"https://127.0.0.1:{self.ports['webhook']}{path_part or '/'}",
                        "caBundle": ca_bundle,
                    }
                out.append(doc)
        return out

    def _register_webhooks(self) -> None:
        docs = self.webhook_configurations()
        if not docs:
            return
        directory = self.directory / "webhooks"
        directory.mkdir(exist_ok=True)
        target = directory / "webhook-configurations.yaml"
        target.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        self.kubectl("apply", "-f", str(target))

    def _wait_default_service_account(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0:
                return
            time.sleep(0.5)
        raise ClusterError("kube-controller-manager did not create the default ServiceAccount within 60s")

    # ----- helpers ------------------------------------------------------------------------
    def _write_kubeconfig(self) -> None:
        p = self.pki
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {
                "server": self.apiserver_url, "certificate-authority": str(p.ca.cert)}}],
            "users": [{"name": "admin", "user": {
                "client-certificate": str(p.admin.cert), "client-key": str(p.admin.key)}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": "admin"}}],
            "current-context": self.name,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        os.chmod(self.kubeconfig, 0o600)

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster; raises ClusterError when ``check`` and it fails."""
        argv = [self._bin("kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)  # noqa: S603
        if check and proc.returncode != 0:
            raise ClusterError(f"`kubectl {' '.join(args)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)


def _aws_module_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("localcluster.aws") is not None


def _json_line(path: Path) -> dict[str, Any] | None:
    """The first line of ``path`` that is a JSON object (``python -m localcluster.aws`` prints one)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    return value
    return None


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def running_cluster(name: str, settings: Settings | None = None,
                    progress: Callable[[str], None] | None = None) -> Iterator[LocalCluster]:
    """Start a cluster for the duration of a ``with`` block; always stopped afterwards."""
    cluster = LocalCluster(name, settings)
    try:
        cluster.up(progress=progress)
        yield cluster
    finally:
        cluster.down(quiet=True)
