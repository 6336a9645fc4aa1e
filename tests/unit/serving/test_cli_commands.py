"""``groupless <command>`` imports only the module that registers the command."""

from __future__ import annotations

import argparse

import pytest

import provisioner.cli as cli


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(subparsers.choices)


def test_each_command_is_registered_by_the_module_named_for_it() -> None:
    assert set(cli.COMMAND_MODULES.values()) == set(cli.SUBCOMMAND_MODULES)
    assert _commands(cli.build_parser()) == set(cli.COMMAND_MODULES)
    for module in cli.SUBCOMMAND_MODULES:
        named = {c for c, m in cli.COMMAND_MODULES.items() if m == module}
        assert _commands(cli.build_parser((module,))) == named, module


def test_a_command_line_builds_the_parser_of_its_command_only(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[str, ...] | None] = []
    real = cli.build_parser

    def recording(modules: tuple[str, ...] | None = None) -> argparse.ArgumentParser:
        built.append(None if modules is None else tuple(modules))
        return real(modules)

    monkeypatch.setattr(cli, "build_parser", recording)
    with pytest.raises(SystemExit):
        cli.main(["plan", "--help"])
    with pytest.raises(SystemExit):
        cli.main(["no-such-command"])
    assert built == [("provisioner.plan",), None]
