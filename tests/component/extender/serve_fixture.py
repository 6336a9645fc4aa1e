"""Serve the extender over HTTPS with gunicorn for the component tests and the benchmark.

``python -m tests.component.extender.serve_fixture --listen 127.0.0.1:PORT --cert F --key F
[--client-ca F] [--max-body-bytes N] [--state fixtures|synthetic:N] [--trigger-log FILE]``

The state is the one of ``tests/fixtures/extender/cluster.json`` (at the time the fixtures were
made, through a fixed clock), or a synthetic cluster of N nodes for the benchmark. Triggers are
appended, one pod UID a line, to ``--trigger-log``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from extender.app import create_app
from localcluster.ports import free_port
from provisioner.clock import FakeClock
from provisioner.serving import serve


@dataclass(frozen=True)
class Server:
    url: str
    ca_file: str
    cert_dir: Path
    process: subprocess.Popen[bytes]


def write_certs(directory: Path) -> Path:
    """A CA and a serving certificate for 127.0.0.1/localhost (``certs.bundle.generate``)."""
    from certs.bundle import generate

    generate(["localhost"], ["127.0.0.1"]).write(directory)
    return directory


@contextlib.contextmanager
def running(cert_dir: Path, *extra: str, timeout: float = 30.0, cli: bool = False,
            env: dict[str, str] | None = None, stderr: Path | None = None) -> Iterator[Server]:
    """Start the extender under gunicorn on a free loopback port; stop it on exit.

    ``cli``: run ``groupless extender`` itself (``extra`` are its flags) instead of the fixture server.
    """
    port = free_port()
    root = Path(__file__).resolve().parents[3]
    if cli:
        argv = [sys.executable, "-m", "provisioner.cli", "extender", "--listen", f"127.0.0.1:{port}",
                "--tls-cert-file", str(cert_dir / "tls.crt"), "--tls-key-file", str(cert_dir / "tls.key"), *extra]
    else:
        argv = [sys.executable, "-m", "tests.component.extender.serve_fixture", "--listen", f"127.0.0.1:{port}",
                "--cert", str(cert_dir / "tls.crt"), "--key", str(cert_dir / "tls.key"), *extra]
    err = open(stderr, "wb") if stderr is not None else subprocess.PIPE  # noqa: SIM115 - closed below
    process = subprocess.Popen(argv, cwd=root, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                               env=env)
    server = Server(f"https://127.0.0.1:{port}", str(cert_dir / "ca.crt"), cert_dir, process)
    try:
        deadline = time.monotonic() + timeout
        context = ssl.create_default_context(cafile=server.ca_file)
        while True:
            if process.poll() is not None:
                output = process.stderr.read().decode() if process.stderr else stderr.read_text() if stderr else ""
                raise RuntimeError(f"extender exited {process.returncode}: {output[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
                    with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                        break
            except (OSError, ssl.SSLError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()
        if stderr is not None and not isinstance(err, int):
            err.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca")
    parser.add_argument("--max-body-bytes", type=int, default=128 * 1024 * 1024)
    parser.add_argument("--state", default="fixtures")
    parser.add_argument("--trigger-log")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    if args.state.startswith("synthetic:"):
        from benchmarks.extender_latency import synthetic_state

        state, now = synthetic_state(int(args.state.split(":", 1)[1]))
    else:
        from tests.fixtures.extender import now as fixture_now
        from tests.fixtures.extender import state as fixture_state

        state, now = fixture_state(), fixture_now()

    trigger = None
    if args.trigger_log:
        path = args.trigger_log

        def trigger(uid: str) -> None:
            with open(path, "a") as log:
                log.write(uid + "\n")

    app = create_app(lambda: state, trigger, max_body_bytes=args.max_body_bytes, clock=FakeClock(now))
    serve(app, listen=args.listen, cert_file=args.cert, key_file=args.key, client_ca_file=args.client_ca,
          threads=args.threads, name="groupless-extender-test")


if __name__ == "__main__":
    main()
