"""``build_helm`` builds a working helm with ``go install`` (a few minutes cold; cached per version after)."""

from __future__ import annotations

import subprocess

from localcluster import helm


def test_built_helm_reports_its_version() -> None:
    binary = helm.build_helm()
    out = subprocess.run([str(binary), "version", "--short"], capture_output=True, text=True, check=True).stdout
    assert out.startswith(helm.HELM_VERSION)
