"""``groupless extender``: serve the kube-scheduler extender over HTTPS under gunicorn.

One worker process with threads (gunicorn ``gthread``) and keep-alive: one in-memory cluster
cache serves every request, and kube-scheduler's connections are reused (a TLS handshake per
call would cost more than the whole filter). Cluster access comes from ``--kubeconfig`` or the
in-cluster service account; with neither, the extender still starts, with an empty state, and
says so: every node then counts as unmanaged and passes (it never blocks scheduling).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from provisioner.logging import add_logging_flags, configure_logging
from provisioner.serving import add_serving_flags

log = logging.getLogger("groupless.extender")

#: The kinds the extender reads (nothing else is listed or watched).
EXTENDER_KINDS = ("Provisioner", "Node", "Pod")


def register(subparsers: Any) -> None:
    """Add ``groupless extender`` to the ``groupless`` command."""
    from extender.app import DEFAULT_MAX_BODY_BYTES
    from extender.handlers import DEFAULT_EXPIRY_HORIZON

    parser = subparsers.add_parser(
        "extender",
        help="serve the kube-scheduler extender (/filter, /prioritize) over HTTPS",
        description="Serve /filter, /prioritize, /healthz and /metrics over HTTPS (gunicorn, one process, threads).",
    )
    add_serving_flags(parser, default_port=8888,
                      client_ca_help="require client certificates signed by this CA (mutual TLS with kube-scheduler)")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig for cluster access (default: in-cluster config, then $KUBECONFIG)")
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, metavar="N",
                        help=f"largest request body; larger ones get 413 (default {DEFAULT_MAX_BODY_BYTES}, 128 MiB)")
    parser.add_argument("--expiry-horizon", type=float, default=DEFAULT_EXPIRY_HORIZON, metavar="SECONDS",
                        help="nodes expiring (ttlSecondsUntilExpired) within this many seconds score lowest "
                        f"(default {DEFAULT_EXPIRY_HORIZON:g})")
    parser.add_argument("--record-requests", metavar="DIR",
                        help="keep the first 20 request bodies of each verb in DIR (<verb>-<n>.json), "
                        "e.g. to see what kube-scheduler sends")
    add_logging_flags(parser)
    parser.set_defaults(func=run)


def _cluster_state(kubeconfig: str | None) -> Any:
    """A ClusterState over the cluster, or None (logged) when there is no way to reach one."""
    from kubernetes.config import ConfigException

    from provisioner.kube.client import KubeClient
    from provisioner.state import ClusterState

    try:
        kube = KubeClient.from_kubeconfig(kubeconfig)
    except ConfigException as error:
        if kubeconfig:
            raise
        log.warning("No cluster access (no --kubeconfig, not in a cluster: %s); starting with an empty state: "
                    "every node counts as unmanaged and passes", error)
        return None
    return ClusterState(kube, kinds=EXTENDER_KINDS)


def run(args: argparse.Namespace) -> int:
    try:
        configure_logging(getattr(args, "log_level", None), getattr(args, "log_format", None))
    except ValueError as error:  # LoggingConfigError: names the flag or variable and the value
        print(f"groupless extender: {error}", file=sys.stderr)
        return 2
    from extender.app import create_app, create_app_for_cluster
    from extender.state import EMPTY_STATE
    from provisioner.serving import ServingError, check_serving_flags, serve_from_flags

    if not args.tls_cert_file or not args.tls_key_file:
        print("groupless extender: --tls-cert-file and --tls-key-file are required "
              "(register the extender with an https:// urlPrefix and tlsConfig.caFile)", file=sys.stderr)
        return 2
    try:  # before the cluster is read or "Serving ..." is logged
        check_serving_flags(args)
    except ServingError as error:
        print(f"groupless extender: {error}", file=sys.stderr)
        return 2
    if args.max_body_bytes < 1:
        print(f"groupless extender: --max-body-bytes must be positive, got {args.max_body_bytes}", file=sys.stderr)
        return 2
    try:
        cluster = _cluster_state(args.kubeconfig)
    except Exception as error:  # a bad kubeconfig file: say so and exit
        print(f"groupless extender: --kubeconfig {args.kubeconfig}: {error}", file=sys.stderr)
        return 2
    options: dict[str, Any] = {"max_body_bytes": args.max_body_bytes, "expiry_horizon": args.expiry_horizon,
                               "record_dir": args.record_requests}
    if cluster is None:
        app = create_app(lambda: EMPTY_STATE, **options)
    else:
        app = create_app_for_cluster(cluster, own_informers=True, **options)
        live = app.extensions["groupless_live_state"]
        # gunicorn forks the serving worker after loading the app: start informers there.
        os.register_at_fork(after_in_child=live.ensure_started)
    log.info("Serving the scheduler extender on https://%s (max body %d bytes)", args.listen, args.max_body_bytes)
    return serve_from_flags(app, args, command="groupless extender", name="groupless-extender")
