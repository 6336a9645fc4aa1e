"""``groupless controller``: every controller in one leader-elected process.

What runs once this replica holds the Lease: adoption of the instances launched without a Node
(once the cache has synced, before anything else), the provisioning controller (batcher, solver,
launches), consolidation (its own loop), the lifecycle controllers (initialization,
expiration, emptiness, termination, garbage collection, Provisioner deletion, counter) behind one
work queue, and a periodic resync. What runs on every replica: the cluster state cache (an informer per kind, so a standby
takes over with a warm cache) and the instance types fetched ahead, ``/healthz``, ``/readyz`` and ``/metrics`` on
``--listen-address``, and, with ``--extender-address``, the scheduler extender over that cache. A replica that loses the
Lease exits (as Karpenter's does) so that it restarts clean as a candidate.

Settings: :mod:`provisioner.settings` (each a flag and a ``GROUPLESS_*`` variable).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from typing import Any

from provisioner.clock import Clock, RealClock
from provisioner.cloudprovider.types import CloudProvider
from provisioner.controllers.health import serve_health, serve_wsgi
from provisioner.controllers.leaderelection import LeaderElector
from provisioner.controllers.manager import Manager, PodsByNode, resync_loop
from provisioner.controllers.objects import Context, EventSink
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.api import KubeAPI
from provisioner.model import labels as wk
from provisioner.model import objects
from provisioner.settings import ControllerSettings, SettingsError, add_arguments, from_args
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add ``groupless controller`` to the ``groupless`` command."""
    parser = subparsers.add_parser(
        "controller",
        help="run the provisioning and lifecycle controllers (leader-elected)",
        description=(
            "Run the Groupless controllers: provisioning of unschedulable pods, node initialization, "
            "expiration (ttlSecondsUntilExpired), emptiness (ttlSecondsAfterEmpty), consolidation "
            "(consolidation.enabled), PDB-safe termination, "
            "garbage collection and Provisioner status. Every flag can also be set with the GROUPLESS_* "
            "environment variable shown; the flag wins."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def kubernetes_version(kube: Any) -> str | None:
    """The API server's ``gitVersion`` (``v1.36.1``) for AMI lookup; ``None`` when it cannot be read."""
    api_client = getattr(kube, "api_client", None)
    if api_client is None:
        return None
    try:
        from kubernetes import client as k8s_client

        return str(k8s_client.VersionApi(api_client).get_code().git_version)
    except Exception as error:  # an unreachable server fails later, with a clearer message
        log.warning("Could not read the Kubernetes version: %s", error)
        return None


def build_cloud_provider(settings: ControllerSettings, clock: Clock, kube: Any = None) -> CloudProvider:
    """The cloud provider the settings name: ``fake`` (in memory), ``kwok`` (Nodes kwok runs) or ``aws`` (boto3).

    Raises SettingsError when ``aws`` is asked for without a cluster name or ``kwok`` without
    ``kube``, CatalogFileError when a kwok catalog file cannot be used.
    """
    if settings.cloud_provider == "fake":
        from provisioner.cloudprovider.fake import FakeCloudProvider

        return FakeCloudProvider(clock=clock)
    if settings.cloud_provider == "kwok":
        from provisioner.cloudprovider.kwok import KwokCloudProvider

        if kube is None:
            raise SettingsError("--cloud-provider kwok needs the Kubernetes API: its instances are Nodes")
        return KwokCloudProvider.from_settings(settings, kube, clock)
    if not settings.aws.cluster_name:
        raise SettingsError("--cluster-name (GROUPLESS_CLUSTER_NAME) is required with --cloud-provider aws")
    from provisioner.cloudprovider.aws.provider import AWSCloudProvider
    from provisioner.cloudprovider.aws.settings import AWSSettings

    aws_settings = AWSSettings.from_controller_settings(settings, kubernetes_version(kube))
    provider = AWSCloudProvider.from_settings(aws_settings, clock=clock)
    provider.start()
    return provider


def launching_provisioners(ledger: InFlightLedger) -> set[str]:
    """Provisioners with a launch running or a Node written that the cache does not show yet."""
    writes = ledger.writes()
    written = {str(objects.labels(n).get(wk.PROVISIONER_NAME) or "") for n in writes.written.values()}
    return (set(writes.launching) | written) - {""}


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
        from provisioner.kube.events import EventRecorder

        recorder = EventRecorder(kube, component="groupless-controller", clock=self.clock, asynchronous=True)
        self.provisioning = ProvisioningController(kube, self.state, cloud, self.clock, recorder,
                                                   settings.provisioning)
        self.ctx = Context(kube=kube, cloud=cloud, clock=self.clock, events=events or recorder,
                           pods_on_node=self.pods, reader=self.state.get, lister=self.state.objects,
                           nominated_until=self.provisioning.ledger.nominated_until)
        self.manager = Manager(self.ctx, settings, replacer=self.provisioning.replace)
        from provisioner.controllers.consolidation import ConsolidationController

        ledger = self.provisioning.ledger
        self.consolidation = ConsolidationController(
            self.ctx, self.state, settings.consolidation, replacer=self.provisioning.replace_nodes,
            in_flight=lambda: ledger.in_flight().keys(), launching=lambda: launching_provisioners(ledger),
            reserved=lambda snapshot, names: ledger.reserved(names, snapshot),
            node_labels=settings.nodes.labels,
        )
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.leading = threading.Event()
        self.threads: list[threading.Thread] = []
        self.health_server: Any = None
        self.extender_server: Any = None

    def healthy(self) -> tuple[bool, str]:
        if self.lost_lease:
            return False, "lost the leader lease"
        dead = [t.name for t in self.threads if not t.is_alive()]
        return (not dead, f"threads stopped: {', '.join(dead)}" if dead else "ok")

    def ready(self) -> tuple[bool, str]:
        if not self.leading.is_set():
            return True, "standby (not the leader)"
        return (True, "ok") if self.state.synced() else (False, "cluster state not synced")

    def start_cache(self) -> None:
        """Start the informers on every replica: a standby keeps a warm cache (fast failover, extender)."""
        self.state.subscribe(self.pods.on_change)
        self.state.subscribe(self.manager.on_change)  # only enqueues; workers run on the leader
        self.state.start()
        # Provisioner usage/limit and per-node allocatable/requested gauges, refreshed per scrape.
        from provisioner import metrics

        self._untrack_metrics = metrics.track_cluster_state(self.state)

    def warm_instance_types(self) -> None:
        """On every replica, once the cache has synced: fetch each Provisioner's instance types, in the background.

        A cloud provider builds its catalog lazily (EC2: seconds, more on a busy machine), and a
        new leader needs it at once, for adoption and its first round: a standby, or a replica
        restarted while it waits for the Lease, has it ready.
        """
        def warm() -> None:
            while not self.stop.is_set() and not self.state.wait_synced(1.0):
                pass
            if not self.stop.is_set():
                self.provisioning.warm_up()

        threading.Thread(target=warm, name="warm-instance-types", daemon=True).start()

    def serve_extender(self) -> None:
        """Serve the scheduler extender from this process's cache when ``--extender-address`` is set."""
        address = self.settings.serving.extender_address
        if not address:
            return
        from extender.app import create_app_for_cluster

        app = create_app_for_cluster(self.state, self.provisioning.trigger, clock=self.clock)
        self.extender_server, _ = serve_wsgi(address, app, "extender")
        log.info("Serving the scheduler extender on http://%s", address)

    def start_leading(self) -> None:
        """Wait for the cache to sync, then start the workers, the resync and provisioning."""
        self.leading.set()
        while not self.state.wait_synced(1.0):
            if self.stop.is_set():
                return
            log.info("Waiting for the cluster state to sync")
        log.info("Cluster state synced; adopting instances launched without a node, then starting controllers")
        # Before any worker: garbage collection must not race adoption for an old orphan, and the
        # first provisioning round must count the adopted nodes as capacity on its way.
        self.provisioning.adopt()
        self.threads += self.manager.run_workers(self.stop)
        resync = threading.Thread(target=resync_loop, args=(self.manager, self.stop, self.settings.resync_seconds),
                                  name="resync", daemon=True)
        resync.start()
        self.threads.append(resync)
        thread = threading.Thread(target=self.provisioning.run, args=(self.stop,), name="provisioning", daemon=True)
        thread.start()
        self.threads.append(thread)
        thread = threading.Thread(target=self.consolidation.run, args=(self.stop,), name="consolidation", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _start_leading_async(self) -> None:
        thread = threading.Thread(target=self.start_leading, name="start-leading", daemon=True)
        thread.start()

    def stop_leading(self) -> None:
        if not self.stop.is_set():
            self.lost_lease = True
            self.stop.set()

    def run(self) -> int:
        """Block until stopped; 0 on a clean stop, 1 when the lease was lost."""
        self.health_server, _ = serve_health(self.settings.serving.listen_address, self.healthy, self.ready)
        log.info("Serving /healthz, /readyz and /metrics on %s", self.settings.serving.listen_address)
        self.start_cache()
        self.warm_instance_types()
        self.serve_extender()
        election = self.settings.leader_election
        if election.enabled:
            elector = LeaderElector(
                self.kube, self.clock, name=election.lease_name, namespace=election.lease_namespace,
                identity=self.identity, lease_duration=election.lease_duration_seconds,
                renew_deadline=election.renew_deadline_seconds, retry_period=election.retry_period_seconds,
            )
            log.info("Waiting for lease %s/%s as %s", election.lease_namespace, election.lease_name, self.identity)
            # start in a thread: syncing a large cluster must not hold up the lease renewals
            elector.run(self.stop, self._start_leading_async, self.stop_leading)
            self.stop.set()  # a replica that never led and was told to stop
        else:
            self.start_leading()
            self.stop.wait()
        self.state.stop()
        for server in (self.health_server, self.extender_server):
            if server is not None:
                server.shutdown()
                server.server_close()
        return 1 if self.lost_lease else 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``groupless controller``; returns the exit code (2 for bad settings)."""
    from provisioner.kube.client import KubeClient
    from provisioner.logging import configure_logging

    try:
        settings = from_args(args)
        configure_logging(settings.logging.level, settings.logging.format)
        if settings.cloud_provider == "aws" and not settings.aws.cluster_name:
            raise SettingsError("--cluster-name (GROUPLESS_CLUSTER_NAME) is required with --cloud-provider aws")
        if settings.cloud_provider == "aws":
            from provisioner.cloudprovider.aws.settings import resolve_region

            resolve_region(settings.aws.region)  # no region at all: a settings error, before any client
    except (SettingsError, ValueError) as error:
        print(f"groupless controller: {error}", file=sys.stderr)
        return 2
    clock = RealClock()
    try:
        kube = KubeClient.from_kubeconfig(settings.kubeconfig, qps=settings.kube_client_qps,
                                          burst=settings.kube_client_burst)
        cloud = build_cloud_provider(settings, clock, kube)
    except Exception as error:  # no kubeconfig, unreadable credentials, a bad endpoint URL
        print(f"groupless controller: cannot start: {error}", file=sys.stderr)
        return 2
    process = ControllerProcess(settings, kube, cloud, clock)

    def on_signal(signum: int, frame: Any) -> None:
        log.info("Received signal %d; shutting down", signum)
        process.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("Starting groupless controller (pid %d, cloud provider %s)", os.getpid(), settings.cloud_provider)
    try:
        return process.run()
    finally:
        stop = getattr(cloud, "stop", None)
        if stop is not None:
            stop()
