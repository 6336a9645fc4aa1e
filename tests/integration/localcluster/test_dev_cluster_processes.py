"""``groupless dev-cluster`` as real processes: the shell evaluating ``env``, a closed stdout pipe, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from localcluster import build, cli

REPO = Path(__file__).resolve().parents[3]


class _EnvCluster:
    def __init__(self, bin_dir: Path) -> None:
        self.binaries = build.Binaries(bin_dir)

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": "/tmp/a b/admin.kubeconfig", "PATH": f"{self.binaries.directory}:/expanded/elsewhere"}


def test_env_prepends_the_bin_dir_to_the_shells_own_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / 'odd "dir" $HOME `x`'
    lines = cli.env_lines(_EnvCluster(bin_dir))
    assert lines[0] == "export KUBECONFIG='/tmp/a b/admin.kubeconfig'"
    assert lines[1].startswith('export PATH="') and lines[1].endswith(':$PATH"')
    assert "/expanded/elsewhere" not in lines[1]
    out = subprocess.run(["/bin/sh", "-c", 'PATH=/sentinel\n' + "\n".join(lines) + '\nprintf %s "$PATH"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == f"{bin_dir}:/sentinel"


def test_status_into_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "GROUPLESS_CACHE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "provisioner.cli", "dev-cluster", "status", "--name", "x"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head` that has already exited
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_sigterm_in_dev_cluster_up_raises_keyboard_interrupt_in_a_real_process() -> None:
    # 'ready' is printed inside the try: the parent signals as soon as it reads it
    code = ("import time\nfrom localcluster.cli import terminate_like_interrupt\nterminate_like_interrupt()\n"
            "try:\n    print('ready', flush=True)\n    time.sleep(30)\nexcept KeyboardInterrupt:\n"
            "    print('graceful teardown', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.read().strip() == "graceful teardown"
    assert proc.wait(timeout=10) == 0
