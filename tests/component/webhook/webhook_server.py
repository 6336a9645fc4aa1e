"""Start and stop ``groupless webhook`` under gunicorn over real HTTPS, with certificates from ``certs``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from certs.bundle import CertBundle, generate
from localcluster.ports import free_port


@dataclass
class Server:
    url: str
    ca_file: str
    bundle: CertBundle
    process: subprocess.Popen[bytes]
    log: Path


def start(directory: Path, *extra: str, client_cert: tuple[str, str] | None = None) -> Server:
    bundle = generate(["localhost"], ["127.0.0.1"])
    paths = bundle.write(directory)
    port = free_port()
    log = directory / "server.log"
    command = [sys.executable, "-m", "provisioner.cli", "webhook", "--listen", f"127.0.0.1:{port}",
               "--tls-cert-file", str(paths["tls.crt"]), "--tls-key-file", str(paths["tls.key"]),
               "--threads", "4", *extra]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(f"https://127.0.0.1:{port}", str(paths["ca.crt"]), bundle, process, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"groupless webhook exited with {process.returncode}: {log.read_text()}")
        try:
            requests.get(f"{server.url}/healthz", verify=server.ca_file, cert=client_cert, timeout=2)
            return server
        except requests.ConnectionError:
            time.sleep(0.2)
    stop(server)
    raise AssertionError(f"groupless webhook did not answer within 30 s: {log.read_text()}")


def stop(server: Server) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)  # gunicorn's arbiter and its worker
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
