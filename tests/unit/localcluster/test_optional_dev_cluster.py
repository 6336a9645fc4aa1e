"""The product image has no ``localcluster`` package: ``groupless`` works without it, minus its subcommands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from localcluster.cluster import available_subcommands
from provisioner import cli


def test_without_the_dev_cluster_package_the_other_subcommands_remain(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"dev-cluster", "demo"} <= available_subcommands()
    monkeypatch.delitem(sys.modules, "localcluster.cli")
    monkeypatch.setitem(sys.modules, "localcluster", None)  # import localcluster -> ModuleNotFoundError
    remaining = available_subcommands()
    assert {"webhook", "extender", "controller", "certs", "plan"} <= remaining
    assert not {"dev-cluster", "demo"} & remaining
    args = cli.build_parser().parse_args(["webhook", "--tls-cert-file", "c", "--tls-key-file", "k"])
    assert args.command == "webhook"


def test_a_missing_dependency_of_an_optional_module_is_not_hidden(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "optional_tool"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("webhook.cli", "optional_tool.cli"))
    monkeypatch.setattr(cli, "OPTIONAL_SUBCOMMAND_MODULES", frozenset({"optional_tool.cli"}))
    with pytest.raises(ModuleNotFoundError) as error:
        cli.build_parser()
    assert error.value.name == "a_dependency_nobody_installed"
