"""Loopback ports for the local cluster's servers and for tests that start a server.

A port handed out by ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 on Linux by default), the same range the
kernel draws source ports from for outgoing connections. Between the moment a port is chosen and
the moment a server binds it, any client connection on the machine (kube-controller-manager to
kube-apiserver, kube-apiserver to etcd, a test's HTTP client) can take it as its source port, and
the server then fails with "address already in use". Ports below the ephemeral range are never
given to outgoing connections, so :func:`free_port` chooses there, at random (two clusters on one
machine rarely pick alike) and only ports that bind right now.
"""
from __future__ import annotations

import errno
import random
import socket
import threading
from pathlib import Path

#: The lowest port :func:`free_port` chooses from: above the registered ports that common
#: development servers use (8080, 9090, 10250, 15000...).
LOWEST_PORT = 20000

_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()
_lock = threading.Lock()


def ephemeral_range(path: Path = _EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range ``(low, high)``, inclusive; Linux's default when unreadable."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(*, rng: random.Random | None = None, attempts: int = 200) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now and no outgoing connection will take.

    Chosen at random in ``[LOWEST_PORT, low)``, where ``low`` is the start of the kernel's
    ephemeral range, and never the same port twice in one process. When that band is too narrow
    (an ephemeral range that starts below ``LOWEST_PORT + 1000``) or ``attempts`` random tries
    all fail, the kernel picks one (``bind`` to port 0), as before. Raises ``OSError`` only when
    even that fails.
    """
    choose = rng or random
    low, _high = ephemeral_range()
    if low - LOWEST_PORT >= 1000:
        for _ in range(attempts):
            port = choose.randrange(LOWEST_PORT, low)
            with _lock:
                if port in _handed_out:
                    continue
                if _bindable(port):
                    _handed_out.add(port)
                    return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
