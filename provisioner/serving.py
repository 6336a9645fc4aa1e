"""One way to serve a WSGI app: gunicorn, one process, ``gthread`` workers, optional (mutual) TLS.

Why one runner for the webhook, the extender and the controller's health/metrics server: they
share the same needs. One worker process, so an in-memory cache (the extender's cluster view,
the webhook's metrics) serves every request; threads and keep-alive, because kube-apiserver and
kube-scheduler hold connections open and call concurrently; TLS 1.2+ because kube-apiserver
only calls webhooks over HTTPS (a certificate for ``https://127.0.0.1`` needs an IP SAN, see
:mod:`certs`); and, when a client CA is given, mutual TLS so only holders of a certificate
signed by it (the apiserver's or scheduler's client certificate) get an answer.

Usage::

    from provisioner.serving import serve
    serve(app, listen="0.0.0.0:8443", cert_file="tls.crt", key_file="tls.key", name="groupless-webhook")

``serve`` blocks until SIGTERM/SIGINT, and installs gunicorn's signal handlers, so call it from
the main thread of a process of its own (tests start ``groupless webhook`` as a subprocess).
The app is loaded before gunicorn forks its worker (``preload_app``): threads started while
building it do not survive the fork, so start them in the worker, e.g. with
``os.register_at_fork(after_in_child=...)`` or lazily on the first request.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys
from collections.abc import Callable
from typing import Any

from provisioner.logging import gunicorn_logger_class

WSGIApp = Callable[..., Any]


class ServingError(ValueError):
    """Bad serving options: an unparsable listen address, a missing certificate file, ..."""


def parse_listen(listen: str) -> str:
    """``HOST:PORT`` (``[::1]:8443`` for IPv6, ``:8443`` for all interfaces) as a gunicorn bind.

    Raises ServingError naming the value when there is no port or the port is not 0..65535.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServingError(f"--listen {listen!r}: expected HOST:PORT, e.g. 0.0.0.0:8443 or [::]:8443")
    if host.startswith("[") != host.endswith("]"):
        raise ServingError(f"--listen {listen!r}: unbalanced brackets around an IPv6 address")
    return f"{host or '0.0.0.0'}:{port}"


def tls_options(cert_file: str | None, key_file: str | None, client_ca_file: str | None) -> dict[str, Any]:
    """Gunicorn settings for TLS; ``{}`` when neither file is given.

    Raises ServingError when only one of cert and key is given, when a file is unreadable, when
    a client CA is given without a serving certificate, or when the files do not load as a
    matching certificate and key (see :func:`check_tls_files`).
    """
    if not cert_file and not key_file:
        if client_ca_file:
            raise ServingError("--client-ca-file needs --tls-cert-file and --tls-key-file")
        return {}
    if not cert_file or not key_file:
        raise ServingError("--tls-cert-file and --tls-key-file must be given together")
    for flag, path in (("--tls-cert-file", cert_file), ("--tls-key-file", key_file),
                       ("--client-ca-file", client_ca_file)):
        if path and not os.access(path, os.R_OK):
            raise ServingError(f"{flag} {path!r}: file does not exist or is not readable")
    check_tls_files(cert_file, key_file, client_ca_file)
    options: dict[str, Any] = {"certfile": cert_file, "keyfile": key_file, "ssl_context": _ssl_context}
    if client_ca_file:
        options.update(ca_certs=client_ca_file, cert_reqs=ssl.CERT_REQUIRED)
    return options


def check_tls_files(cert_file: str, key_file: str, client_ca_file: str | None = None) -> None:
    """Load the serving pair (and the client CA) the way the server will, before anything listens.

    gunicorn loads them per connection, so a key that does not belong to the certificate
    (swapped files, a key from another ``groupless certs generate``) would otherwise start a
    server whose every handshake fails with ``[SSL] PEM lib``. Raises ServingError naming the
    file(s): no PEM certificate in ``cert_file``, no unencrypted PEM private key in
    ``key_file``, a key that does not match the certificate, or no CA certificate in
    ``client_ca_file``.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as error:
        raise ServingError(_tls_pair_problem(cert_file, key_file, error)) from None
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (ssl.SSLError, OSError) as error:
            raise ServingError(f"--client-ca-file {client_ca_file!r}: no PEM CA certificate in it ({error})") from None


def _tls_pair_problem(cert_file: str, key_file: str, error: Exception) -> str:
    """Which of the two files is wrong, read with ``cryptography`` (OpenSSL only says "PEM lib")."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        with open(cert_file, "rb") as handle:
            x509.load_pem_x509_certificates(handle.read())
    except (OSError, ValueError):
        hint = " (it holds a private key: swapped with --tls-key-file?)" if _holds_key(cert_file) else ""
        return f"--tls-cert-file {cert_file!r}: no PEM certificate in it{hint}"
    try:
        with open(key_file, "rb") as handle:
            serialization.load_pem_private_key(handle.read(), password=None)
    except (OSError, ValueError, TypeError):
        return f"--tls-key-file {key_file!r}: no unencrypted PEM private key in it"
    if isinstance(error, ssl.SSLError) and error.reason == "KEY_VALUES_MISMATCH":
        return (f"--tls-key-file {key_file!r} is not the key of the certificate in --tls-cert-file {cert_file!r} "
                "(swapped files, or a key from another certificate?)")
    return f"--tls-cert-file {cert_file!r} and --tls-key-file {key_file!r} do not load: {error}"


def _holds_key(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"PRIVATE KEY-----" in handle.read(64 * 1024)
    except OSError:
        return False


def _ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """Gunicorn's default context (cert, key, client CA, cert_reqs) with TLS 1.2 as the floor."""
    context = default_ssl_context_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _application(app: WSGIApp, options: dict[str, Any]) -> Any:
    """A gunicorn application serving ``app`` with ``options``.

    gunicorn is imported here, not at module level, so that ``groupless --help`` and the
    subcommands that only register :func:`add_serving_flags` do not pay for importing it.
    """
    from gunicorn.app.base import BaseApplication

    class _Application(BaseApplication):  # type: ignore[misc]  # gunicorn ships no type hints
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> WSGIApp:
            return app

    return _Application()


def _gunicorn_level() -> str:
    """The root logger's level (set by ``configure_logging``) as a gunicorn ``loglevel`` name."""
    name = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    return name if name in ("debug", "info", "warning", "error", "critical") else "info"


def gunicorn_options(
    *,
    listen: str,
    cert_file: str | None,
    key_file: str | None,
    client_ca_file: str | None = None,
    threads: int = 8,
    name: str = "groupless",
    timeout: int = 30,
    keepalive: int = 75,
    access_log: bool = False,
) -> dict[str, Any]:
    """The gunicorn settings :func:`serve` uses (exposed for tests and for ``--help`` texts)."""
    if threads < 1:
        raise ServingError(f"threads must be at least 1, got {threads}")
    options: dict[str, Any] = {
        "bind": [parse_listen(listen)],
        "workers": 1,
        "worker_class": "gthread",
        "threads": threads,
        # kube-apiserver reuses connections for up to 90s idle; keep ours open a little less
        # than that so it never writes into a socket we are closing.
        "keepalive": keepalive,
        "timeout": timeout,
        "graceful_timeout": 10,
        "proc_name": name,
        "accesslog": "-" if access_log else None,
        "errorlog": "-",
        # gunicorn's own lines ("Listening at", "Booting worker", worker timeouts, access lines)
        # go through the root logger's handler, so --log-format json is JSON throughout, at the
        # level --log-level chose.
        "logger_class": gunicorn_logger_class(),
        "loglevel": _gunicorn_level(),
        # Headers over 8 KiB and request lines over 4 KiB are refused by gunicorn itself (400).
        "limit_request_line": 4094,
        "preload_app": True,
        "control_socket_disable": True,
    }
    options.update(tls_options(cert_file, key_file, client_ca_file))
    return options


def serve(
    app: WSGIApp,
    *,
    listen: str,
    cert_file: str | None,
    key_file: str | None,
    client_ca_file: str | None = None,
    threads: int = 8,
    name: str = "groupless",
    timeout: int = 30,
    access_log: bool = False,
) -> None:
    """Serve the WSGI ``app`` on ``listen`` (``HOST:PORT``) until SIGTERM/SIGINT; blocks.

    - ``cert_file``/``key_file``: PEM serving certificate (chain) and key; both None serves
      plain HTTP (health and metrics behind a NetworkPolicy only).
    - ``client_ca_file``: PEM CA bundle; when set, clients must present a certificate signed by
      it (``ssl.CERT_REQUIRED``).
    - ``threads``: concurrent requests (gthread worker threads); one worker process always.
    - ``timeout``: seconds a request may take before gunicorn restarts the worker.

    Raises ServingError for bad options before anything listens. Must run in the main thread.
    """
    options = gunicorn_options(
        listen=listen, cert_file=cert_file, key_file=key_file, client_ca_file=client_ca_file,
        threads=threads, name=name, timeout=timeout, access_log=access_log,
    )
    _application(app, options).run()


def add_serving_flags(parser: argparse.ArgumentParser, *, default_port: int, client_ca_help: str) -> None:
    """Add the flags every HTTPS server of Groupless takes, named as kube-apiserver's own.

    ``--listen HOST:PORT`` (default ``0.0.0.0:<default_port>``), ``--tls-cert-file``,
    ``--tls-key-file``, ``--client-ca-file`` (``client_ca_help`` says who the clients are) and
    ``--threads`` (default 8). :func:`serve_from_flags` reads them back.
    """
    parser.add_argument("--listen", default=f"0.0.0.0:{default_port}", metavar="HOST:PORT",
                        help=f"address to listen on (default 0.0.0.0:{default_port}; [::]:{default_port} for IPv6)")
    parser.add_argument("--tls-cert-file", metavar="FILE", help="PEM serving certificate (chain)")
    parser.add_argument("--tls-key-file", metavar="FILE", help="PEM private key of the serving certificate")
    parser.add_argument("--client-ca-file", metavar="FILE", help=client_ca_help)
    parser.add_argument("--threads", type=int, default=8, help="concurrent requests (default 8)")


def check_serving_flags(args: argparse.Namespace, *, cert_file: str | None = None, key_file: str | None = None) -> None:
    """Check the flags of :func:`add_serving_flags` as :func:`serve_from_flags` will, without serving.

    For a command that does work (or logs "Serving ...") before it serves: call it first, so
    ``--listen foo`` or a mismatched key is rejected before anything else happens. Raises
    ServingError with the same one-line reason :func:`serve_from_flags` would print.
    """
    gunicorn_options(listen=args.listen, cert_file=cert_file or args.tls_cert_file,
                     key_file=key_file or args.tls_key_file, client_ca_file=args.client_ca_file,
                     threads=args.threads)


def serve_from_flags(
    app: WSGIApp,
    args: argparse.Namespace,
    *,
    command: str,
    name: str,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> int:
    """:func:`serve` with the flags of :func:`add_serving_flags`; the exit code of ``command``.

    ``cert_file``/``key_file`` override ``--tls-cert-file``/``--tls-key-file`` (e.g. with
    self-bootstrapped certificates). A ServingError (bad ``--listen``, unreadable file, ...) is
    printed as ``<command>: <error>`` on stderr and gives 2; a clean stop gives 0.
    """
    try:
        serve(app, listen=args.listen, cert_file=cert_file or args.tls_cert_file,
              key_file=key_file or args.tls_key_file, client_ca_file=args.client_ca_file,
              threads=args.threads, name=name)
    except ServingError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 2
    return 0
