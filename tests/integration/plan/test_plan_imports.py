"""``groupless plan`` starts without the servers' and the controller's libraries (a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import sys
from provisioner import cli
try:
    cli.main(["plan", "--help"])
except SystemExit:
    pass
print(__import__("json").dumps(sorted(m for m in sys.modules if m.split(".")[0] in {names})))
"""

HEAVY = ("flask", "werkzeug", "gunicorn", "boto3", "botocore", "kubernetes", "cryptography", "extender", "webhook")


def test_plan_imports_no_server_cloud_or_kubernetes_client() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT.replace("{names}", repr(set(HEAVY)))],
                         capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
