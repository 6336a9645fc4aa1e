from __future__ import annotations

from typing import Any

from provisioner.controllers.health import health_app


def call(app: Any, path: str) -> tuple[str, bytes]:
    seen: list[str] = []
    body = b"".join(app({"PATH_INFO": path}, lambda status, headers: seen.append(status)))
    return seen[0], body


def test_probes_and_metrics() -> None:
    app = health_app(lambda: (True, "ok"), lambda: (False, "cluster state not synced"))
    assert call(app, "/healthz") == ("200 OK", b"ok\n")
    assert call(app, "/readyz") == ("503 Service Unavailable", b"cluster state not synced\n")
    status, body = call(app, "/metrics")
    assert status == "200 OK" and b"groupless_nodes_terminated_total" in body
    assert call(app, "/other")[0] == "404 Not Found"


def test_serves_on_ipv4_and_ipv6_loopback() -> None:
    import socket
    import urllib.request

    from provisioner.controllers.health import serve_health

    addresses = ["127.0.0.1:0"]
    if socket.has_ipv6:
        try:
            with socket.socket(socket.AF_INET6) as probe:
                probe.bind(("::1", 0))
            addresses.append("[::1]:0")
        except OSError:
            pass
    for listen in addresses:
        server, _ = serve_health(listen, lambda: (True, "ok"), lambda: (True, "ok"))
        try:
            host = "[::1]" if listen.startswith("[") else "127.0.0.1"
            assert urllib.request.urlopen(f"http://{host}:{server.server_address[1]}/healthz").read() == b"ok\n"
        finally:
            server.shutdown()
            server.server_close()
