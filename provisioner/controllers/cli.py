"""``groupless controller``: every controller in one leader-elected process.

What runs, once this replica holds the Lease: the cluster state cache (an informer per kind),
the provisioning controller (batcher, solver, launches), the lifecycle controllers
(initialization, expiration, emptiness, termination, garbage collection, Provisioner
deletion, counter) behind one work queue, and a periodic resync. What runs always:
``/healthz``, ``/readyz`` and ``/metrics`` on ``--listen-address``. A replica that loses the
Lease exits (as Karpenter's does) so that it restarts clean as a candidate.

Settings: :mod:`provisioner.settings` (each a flag and a ``GROUPLESS_*`` variable).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from provisioner.clock import Clock, RealClock
from provisioner.cloudprovider.types import CloudProvider
from provisioner.controllers.expiration import Replacer
from provisioner.controllers.health import serve_health
from provisioner.controllers.leaderelection import LeaderElector
from provisioner.controllers.manager import Manager, PodsByNode, resync_loop
from provisioner.controllers.objects import Context, EventSink, LogEvents
from provisioner.kube.api import KubeAPI, Object
from provisioner.settings import ControllerSettings, SettingsError, add_arguments, from_args

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add ``groupless controller`` to the ``groupless`` command."""
    parser = subparsers.add_parser(
        "controller",
        help="run the provisioning and lifecycle controllers (leader-elected)",
        description=(
            "Run the Groupless controllers: provisioning of unschedulable pods, node initialization, "
            "expiration (ttlSecondsUntilExpired), emptiness (ttlSecondsAfterEmpty), PDB-safe termination, "
            "garbage collection and Provisioner status. Every flag can also be set with the GROUPLESS_* "
            "environment variable shown; the flag wins."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def build_cloud_provider(settings: ControllerSettings, clock: Clock) -> CloudProvider:
    """The cloud provider the settings name: ``fake`` (in memory) or ``aws`` (boto3).

    Raises SettingsError when ``aws`` is asked for without a cluster name.
    """
    if settings.cloud_provider == "fake":
        from provisioner.cloudprovider.fake import FakeCloudProvider

        return FakeCloudProvider(clock=clock)
    if not settings.cluster_name:
        raise SettingsError("--cluster-name (GROUPLESS_CLUSTER_NAME) is required with --cloud-provider aws")
    aws: Any = importlib.import_module("provisioner.cloudprovider.aws")
    factory = getattr(aws, "from_controller_settings", None) or getattr(aws, "build", None)
    if factory is None:
        raise SettingsError("the AWS cloud provider is not available in this build")
    provider: CloudProvider = factory(settings, clock=clock)
    return provider


def build_provisioning(ctx: Context, state: Any, settings: ControllerSettings) -> Any | None:
    """The provisioning controller, or ``None`` when this build has none (logged)."""
    try:
        module: Any = importlib.import_module("provisioner.controllers.provisioning")
    except ImportError as error:
        log.warning("Provisioning controller unavailable (%s): only lifecycle controllers run", error)
        return None
    if getattr(module, "ProvisioningController", None) is None:
        log.warning("Provisioning controller unavailable in this build: only lifecycle controllers run")
        return None
    settings_cls = getattr(module, "ProvisioningSettings", None)
    kwargs: dict[str, Any] = {}
    if settings_cls is not None:
        from_settings = getattr(settings_cls, "from_controller_settings", None)
        kwargs["settings"] = from_settings(settings) if from_settings else settings_cls()
    return module.ProvisioningController(
        api=ctx.kube, cloud=ctx.cloud, state=state, clock=ctx.clock, events=ctx.events, **kwargs
    )


def launched_node_names(result: Any) -> list[str]:
    """Names of the nodes a ``ProvisionResult`` launched (tolerating its exact shape)."""
    for attribute in ("node_names", "launched_node_names"):
        names = getattr(result, attribute, None)
        if names:
            return [str(n) for n in names]
    for attribute in ("nodes", "launched"):
        items = getattr(result, attribute, None) or ()
        names = []
        for item in items:
            if isinstance(item, str):
                names.append(item)
            elif isinstance(item, dict):
                names.append(str((item.get("metadata") or {}).get("name") or ""))
            else:
                names.append(str(getattr(item, "name", "") or ""))
        if [n for n in names if n]:
            return [n for n in names if n]
    return []


def provisioning_replacer(provisioning: Any) -> Replacer:
    """Adapt ``ProvisioningController.provision(pods, exclude_nodes=...)`` to the expiration controller."""

    def replace(pods: Sequence[Object], node_name: str) -> list[str]:
        return launched_node_names(provisioning.provision(list(pods), exclude_nodes={node_name}))

    return replace


class ControllerProcess:
    """The wiring of ``groupless controller`` around an API, a cloud provider and a clock."""

    def __init__(self, settings: ControllerSettings, kube: KubeAPI, cloud: CloudProvider,
                 clock: Clock | None = None, *, events: EventSink | None = None, identity: str | None = None) -> None:
        from provisioner.state.cluster import ClusterState

        self.settings = settings
        self.kube = kube
        self.cloud = cloud
        self.clock: Clock = clock or RealClock()
        self.stop = threading.Event()
        self.lost_lease = False
        self.state = ClusterState(kube, self.clock)
        self.pods = PodsByNode()
        if events is None:
            from provisioner.kube.events import EventRecorder

            events = EventRecorder(kube, component="groupless-controller", clock=self.clock, asynchronous=True)
        self.ctx = Context(kube=kube, cloud=cloud, clock=self.clock, events=events or LogEvents(),
                           pods_on_node=self.pods)
        self.provisioning = build_provisioning(self.ctx, self.state, settings)
        replacer = provisioning_replacer(self.provisioning) if self.provisioning is not None else None
        self.manager = Manager(self.ctx, settings, replacer=replacer)
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.leading = threading.Event()
        self.threads: list[threading.Thread] = []
        self.health_server: Any = None

    def healthy(self) -> tuple[bool, str]:
        if self.lost_lease:
            return False, "lost the leader lease"
        dead = [t.name for t in self.threads if not t.is_alive()]
        return (not dead, f"threads stopped: {', '.join(dead)}" if dead else "ok")

    def ready(self) -> tuple[bool, str]:
        if not self.leading.is_set():
            return True, "standby (not the leader)"
        return (True, "ok") if self.state.synced() else (False, "cluster state not synced")

    def start_leading(self) -> None:
        """Start the informers, wait for them to sync, then the workers, resync and provisioning."""
        self.leading.set()
        self.state.subscribe(self.pods.on_change)
        self.state.subscribe(self.manager.on_change)
        self.state.start()
        while not self.state.wait_synced(1.0):
            if self.stop.is_set():
                return
            log.info("Waiting for the cluster state to sync")
        log.info("Cluster state synced; starting controllers")
        self.threads += self.manager.run_workers(self.stop)
        resync = threading.Thread(target=resync_loop, args=(self.manager, self.stop, self.settings.resync_period),
                                  name="resync", daemon=True)
        resync.start()
        self.threads.append(resync)
        if self.provisioning is not None:
            start = getattr(self.provisioning, "start", None) or getattr(self.provisioning, "run", None)
            if start is not None:
                thread = threading.Thread(target=start, args=(self.stop,), name="provisioning", daemon=True)
                thread.start()
                self.threads.append(thread)

    def stop_leading(self) -> None:
        if not self.stop.is_set():
            self.lost_lease = True
            self.stop.set()
        self.state.stop()

    def run(self) -> int:
        """Block until stopped; 0 on a clean stop, 1 when the lease was lost."""
        self.health_server, _ = serve_health(self.settings.listen_address, self.healthy, self.ready)
        log.info("Serving /healthz, /readyz and /metrics on %s", self.settings.listen_address)
        if self.settings.leader_elect:
            elector = LeaderElector(
                self.kube, self.clock, name=self.settings.lease_name, namespace=self.settings.lease_namespace,
                identity=self.identity, lease_duration=self.settings.lease_duration,
                renew_deadline=self.settings.renew_deadline, retry_period=self.settings.retry_period,
            )
            log.info("Waiting for lease %s/%s as %s", self.settings.lease_namespace, self.settings.lease_name,
                     self.identity)
            elector.run(self.stop, self.start_leading, self.stop_leading)
        else:
            self.start_leading()
            self.stop.wait()
            self.state.stop()
        self.health_server.shutdown()
        self.health_server.server_close()
        return 1 if self.lost_lease else 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``groupless controller``; returns the exit code (2 for bad settings)."""
    from provisioner.logging import configure_logging

    try:
        settings = from_args(args)
        configure_logging(settings.log_level, settings.log_format)
        clock = RealClock()
        cloud = build_cloud_provider(settings, clock)
    except (SettingsError, ValueError) as error:
        print(f"groupless controller: {error}", file=sys.stderr)
        return 2
    from provisioner.kube.client import KubeClient

    kube = KubeClient.from_kubeconfig(settings.kubeconfig)
    process = ControllerProcess(settings, kube, cloud, clock)

    def on_signal(signum: int, frame: Any) -> None:
        log.info("Received signal %d; shutting down", signum)
        process.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("Starting groupless controller (pid %d, cloud provider %s)", os.getpid(), settings.cloud_provider)
    return process.run()
