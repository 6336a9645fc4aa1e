"""``groupless webhook``: serve the Provisioner admission webhooks over HTTPS under gunicorn.

Two ways to get a certificate: files (``--tls-cert-file``/``--tls-key-file``, e.g. from
``groupless certs generate`` or a cert-manager Secret mounted into the Pod), or
``--bootstrap-certs``, where the webhook keeps its own CA and certificate in a Secret and
patches the CA into our webhook configurations before it starts serving (see :mod:`certs.bootstrap`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
from typing import Any

from certs.bootstrap import CHECK_INTERVAL_SECONDS, DEFAULT_NAMESPACE, DEFAULT_SECRET, DEFAULT_SERVICE
from provisioner.logging import add_logging_flags, configure_logging
from provisioner.serving import add_serving_flags

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add ``groupless webhook`` to the ``groupless`` command."""
    parser = subparsers.add_parser(
        "webhook",
        help="serve the Provisioner defaulting and validation webhooks (/mutate, /validate) over HTTPS",
        description="Serve /mutate, /validate, /healthz and /metrics over HTTPS (gunicorn, one process, threads).",
    )
    add_serving_flags(parser, default_port=8443,
                      client_ca_help="require client certificates signed by this CA (mutual TLS)")
    boot = parser.add_argument_group("self-bootstrapped certificates")
    boot.add_argument("--bootstrap-certs", action="store_true",
                      help="keep a CA and serving certificate in a Secret (created if absent) and inject the CA "
                      "into the webhook configurations; ignores --tls-cert-file/--tls-key-file")
    boot.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, then $KUBECONFIG)")
    boot.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                      help=f"namespace of the Secret and the Service (default {DEFAULT_NAMESPACE})")
    boot.add_argument("--secret-name", default=DEFAULT_SECRET,
                      help=f"Secret holding ca.crt, ca.key, tls.crt, tls.key (default {DEFAULT_SECRET})")
    boot.add_argument("--service-name", default=DEFAULT_SERVICE,
                      help=f"Service the API server calls; its DNS names become SANs (default {DEFAULT_SERVICE})")
    boot.add_argument("--cert-dir", metavar="DIR", help="where to write the certificates (default: a temporary dir)")
    boot.add_argument("--extra-dns", action="append", default=[], metavar="NAME", help="additional DNS SAN")
    boot.add_argument("--extra-ip", action="append", default=[], metavar="ADDR", help="additional IP SAN")
    boot.add_argument("--cert-check-interval", type=float, default=CHECK_INTERVAL_SECONDS, metavar="SECONDS",
                      help="re-check the Secret and caBundles this often while serving "
                      f"(default {CHECK_INTERVAL_SECONDS:.0f}; 0 disables)")
    add_logging_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        configure_logging(getattr(args, "log_level", None), getattr(args, "log_format", None))
    except ValueError as error:  # LoggingConfigError: names the flag or variable and the value
        print(f"groupless webhook: {error}", file=sys.stderr)
        return 2
    from provisioner.serving import serve_from_flags
    from webhook.app import create_app

    cert_file, key_file = args.tls_cert_file, args.tls_key_file
    if args.bootstrap_certs:
        try:
            cert_file, key_file = _bootstrap(args)
        except Exception as error:  # any API or file error: say it and exit non-zero
            print(f"groupless webhook: certificate bootstrap failed: {error}", file=sys.stderr)
            return 1
    elif not cert_file or not key_file:
        print("groupless webhook: --tls-cert-file and --tls-key-file are required "
              "(kube-apiserver only calls webhooks over HTTPS), or use --bootstrap-certs", file=sys.stderr)
        return 2
    return serve_from_flags(create_app(), args, command="groupless webhook", name="groupless-webhook",
                            cert_file=cert_file, key_file=key_file)


def _bootstrap(args: argparse.Namespace) -> tuple[str, str]:
    """Certificates from the Secret (made if absent), caBundles injected, a refresher started."""
    from certs.bootstrap import ensure_certificates, keep_fresh
    from certs.bundle import CERT_FILE, KEY_FILE, service_dns_names
    from provisioner.kube.client import KubeClient

    kube = KubeClient.from_kubeconfig(args.kubeconfig)
    cert_dir = args.cert_dir or tempfile.mkdtemp(prefix="groupless-webhook-certs-")
    ensure: dict[str, Any] = {
        "cert_dir": cert_dir, "namespace": args.namespace, "secret_name": args.secret_name,
        "dns_names": [*service_dns_names(args.service_name, args.namespace), *args.extra_dns],
        "ip_addresses": args.extra_ip,
    }
    result = ensure_certificates(kube, **ensure)
    log.info("Webhook certificates ready in %s (created: %s, caBundle injected into: %s)",
             cert_dir, result.created, ", ".join(result.patched) or "nothing new")
    if args.cert_check_interval > 0:
        # Runs in gunicorn's arbiter process; the worker reads the files per connection.
        keep_fresh(kube, threading.Event(), interval_seconds=args.cert_check_interval, **ensure)
    return f"{cert_dir}/{CERT_FILE}", f"{cert_dir}/{KEY_FILE}"
