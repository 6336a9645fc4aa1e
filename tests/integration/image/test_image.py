"""The product image, built here by scripts/build-image.sh and run as the chart runs it.

The build is cached by the hash of its inputs (a second run takes seconds); a cold one installs
buildah/podman/mmdebstrap, makes the Debian base and builds the Dockerfile (minutes, see
docs/installation.md). Runs use the script's ``run``: read-only root filesystem, the image's own
non-root user, host network (servers on 127.0.0.1).
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.ports import free_port
from provisioner.cli import version

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "build-image.sh"
CERT_DIR = "/var/run/groupless/certs"  # where the chart mounts them
#: the chart's podSecurityContext.runAsUser / runAsGroup
UID = 65532

# a cold build (apt-get, mmdebstrap, pip) takes minutes: more than the suite's default timeout
pytestmark = pytest.mark.timeout(2400)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    if os.geteuid() != 0:
        pytest.fail("the image test builds with rootful buildah: run it as root (CI does)", pytrace=False)
    started = time.monotonic()
    log = tmp_path_factory.mktemp("image") / "build.log"
    with log.open("w") as stderr:
        proc = subprocess.run(["bash", str(SCRIPT)], stdout=subprocess.PIPE, stderr=stderr, text=True)
    if proc.returncode != 0:
        pytest.fail(f"scripts/build-image.sh failed ({proc.returncode}); end of {log}:\n{log.read_text()[-6000:]}",
                    pytrace=False)
    print(f"\n[image] {proc.stdout.strip()} ready in {time.monotonic() - started:.0f}s (log: {log})", file=sys.stderr)
    return proc.stdout.strip().splitlines()[-1]


def run(image: str, *args: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``scripts/build-image.sh run [options] -- args`` (the build is cached: it only checks the hash)."""
    return subprocess.run(["bash", str(SCRIPT), "run", *options, "--", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_image_reports_the_package_version(image: str) -> None:
    proc = run(image, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"groupless {version()}"
    assert image.rsplit(":", 1)[1].startswith(version() + "-")


def test_it_runs_as_the_charts_non_root_user_on_a_read_only_root(image: str) -> None:
    probe = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "for path in ('/opt/groupless/probe', '/probe'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "    except OSError as error:\n"
        "        print(path, error.strerror)\n"
        "open('/tmp/probe', 'w').write('ok')\n"
        "print('/tmp', open('/tmp/probe').read())\n"
    )
    proc = run(image, "-c", probe, options=("--entrypoint", "python3"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{UID} {UID}",
        "/opt/groupless/probe Read-only file system",
        "/probe Read-only file system",
        "/tmp ok",
    ]


def test_the_dev_cluster_is_not_in_the_product_image(image: str) -> None:
    proc = run(image, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "webhook" in proc.stdout and "controller" in proc.stdout and "extender" in proc.stdout
    assert "dev-cluster" not in proc.stdout and "demo" not in proc.stdout
    probe = run(image, "-c", "import importlib.util as u; print(u.find_spec('localcluster'), u.find_spec('moto'))",
                options=("--entrypoint", "python3"))
    assert probe.stdout.strip() == "None None", probe.stderr


@pytest.fixture
def certificates(tmp_path: Path) -> Iterator[Path]:
    """``groupless certs generate`` for 127.0.0.1, readable by the image's user only (as a Secret mount)."""
    out = tmp_path / "certs"
    subprocess.run([sys.executable, "-m", "provisioner.cli", "certs", "generate", "--ip", "127.0.0.1",
                    "--dns", "localhost", "--out", str(out)], check=True, capture_output=True, text=True)
    for path in (out, *out.iterdir()):
        os.chown(path, UID, UID)
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_the_webhook_serves_healthz_over_https_with_certificates_from_certs(image: str, certificates: Path) -> None:
    port = free_port()
    name = f"groupless-test-{uuid.uuid4().hex[:8]}"
    server = subprocess.Popen(
        ["bash", str(SCRIPT), "run", "--name", name, "--volume", f"{certificates}:{CERT_DIR}:ro", "--",
         "webhook", "--listen", f"127.0.0.1:{port}",
         "--tls-cert-file", f"{CERT_DIR}/tls.crt", "--tls-key-file", f"{CERT_DIR}/tls.key"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    context = ssl.create_default_context(cafile=str(certificates / "ca.crt"))  # verifies chain and IP SAN
    try:
        deadline = time.monotonic() + 120
        answer: tuple[int, bytes] | None = None
        last_error: Exception | None = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=5, context=context) as r:
                    answer = (r.status, r.read())
                    break
            except (OSError, ssl.SSLError) as error:
                last_error = error
                time.sleep(0.5)
        assert answer is not None, f"no answer ({last_error}); container exited {server.poll()}"
        assert answer[0] == 200
        # the certificate is the one certs/ made: a client trusting another CA refuses it
        with pytest.raises(urllib.error.URLError) as refused:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=5, context=ssl.create_default_context())
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError), refused.value
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "5", name], capture_output=True)
        output = server.communicate(timeout=60)[0]
    print(f"\n[image] webhook container output (tail):\n{output[-1500:]}", file=sys.stderr)
