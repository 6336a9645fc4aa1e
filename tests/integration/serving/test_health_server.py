"""The controller's health server on real loopback sockets (IPv4, and IPv6 where the host has it)."""

from __future__ import annotations


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
