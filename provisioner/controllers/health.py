"""``/healthz``, ``/readyz`` and ``/metrics`` of the controller process, on one plain-HTTP port.

(:func:`serve_wsgi` also serves the optional in-process scheduler extender.)

Why not gunicorn (:mod:`provisioner.serving`) here: gunicorn serves from a forked worker
process, which could not see the controller threads' state that ``/healthz`` reports. A
threaded WSGI server from the standard library in a daemon thread of the controller process
serves these three tiny endpoints; the metrics body comes from :func:`provisioner.metrics.exposition`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from provisioner import metrics
from provisioner.serving import parse_listen

Check = Callable[[], tuple[bool, str]]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # probes every few seconds would flood the log


def health_app(healthy: Check, ready: Check) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving the probes and the metrics.

    ``/healthz`` from ``healthy()``, ``/readyz`` from ``ready()`` (200, or 503 with the reason),
    ``/metrics`` in Prometheus text format, 404 otherwise.
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok, reason = (healthy if path == "/healthz" else ready)()
            body = (reason or "ok").encode() + b"\n"
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
            return [body]
        if path == "/metrics":
            body, content_type = metrics.exposition()
            start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
            return [body]
        body = b"not found\n"
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def serve_wsgi(listen: str, app: Callable[..., Iterable[bytes]], name: str) -> tuple[WSGIServer, threading.Thread]:
    """Serve a WSGI ``app`` on ``listen`` (``HOST:PORT``, ``[::]:PORT`` for IPv6) from a daemon thread.

    Raises ServingError (from :func:`provisioner.serving.parse_listen`) when malformed, OSError
    when the address cannot be bound.
    """
    host, _, port = parse_listen(listen).rpartition(":")
    host = host.strip("[]")
    server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
    server = make_server(host, int(port), app, server_class=server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    return server, thread


def serve_health(listen: str, healthy: Check, ready: Check) -> tuple[WSGIServer, threading.Thread]:
    """Serve :func:`health_app` on ``listen`` (``HOST:PORT``) in a daemon thread; ServingError if malformed."""
    return serve_wsgi(listen, health_app(healthy, ready), "health")
