"""``groupless --version`` prints the version of the installed package."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import provisioner.cli as cli

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_version_comes_from_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    expected = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert capsys.readouterr().out == f"groupless {expected}\n"


def test_version_without_an_installed_package_says_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert cli.version() == "unknown"
