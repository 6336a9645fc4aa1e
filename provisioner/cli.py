"""The ``groupless`` command: one entry point, a subcommand per process or tool.

Each area registers its own subcommands (``register(subparsers)`` in its ``cli`` module), so
this file only wires them together and never grows with their options. A command line that
names a subcommand imports only the module that registers it (:data:`COMMAND_MODULES`): the
webhook's and the extender's servers (flask, cryptography), the controller (the Kubernetes
client, boto3) are not imported for ``groupless plan``, which saves about half a second of
start-up; without a known subcommand (``groupless --help``, a typo) every module is.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

#: The distribution whose metadata gives ``groupless --version``.
DISTRIBUTION = "groupless"


def version() -> str:
    """The installed version of Groupless (``pyproject.toml``'s ``version``), from package metadata.

    ``unknown`` when the package is not installed (run from a source tree without ``pip install``).
    """
    import importlib.metadata  # only for --version: reading package metadata costs start-up time

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: prints ``groupless <version>`` and exits, reading the version only then."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"groupless {version()}")
        parser.exit()

#: Modules exposing ``register(subparsers: argparse._SubParsersAction) -> None``.
SUBCOMMAND_MODULES = (
    "webhook.cli",            # groupless webhook
    "certs.cli",              # groupless certs generate
    "extender.cli",           # groupless extender
    "provisioner.app.controller",  # groupless controller
    "provisioner.plan",       # groupless plan
    "localcluster.cli",       # groupless dev-cluster, groupless demo
)

#: Subcommand -> the module of :data:`SUBCOMMAND_MODULES` that registers it (a unit test checks
#: that the two agree).
COMMAND_MODULES = {
    "webhook": "webhook.cli",
    "certs": "certs.cli",
    "extender": "extender.cli",
    "controller": "provisioner.app.controller",
    "plan": "provisioner.plan",
    "dev-cluster": "localcluster.cli",
    "demo": "localcluster.cli",
}

#: Modules an installation may lack: the image leaves the dev cluster (``localcluster``) out,
#: its subcommands run from a checkout.
OPTIONAL_SUBCOMMAND_MODULES = frozenset({"localcluster.cli"})


def build_parser(modules: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``groupless`` parser with the subcommands of ``modules`` (default: every one of :data:`SUBCOMMAND_MODULES`)."""
    parser = argparse.ArgumentParser(
        prog="groupless",
        description="Groupless: a groupless node autoscaler for Kubernetes (Karpenter's Provisioner API).",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in SUBCOMMAND_MODULES if modules is None else modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            # only the optional module (or its package) may be missing, not something it imports
            missing = error.name or ""
            if module_name in OPTIONAL_SUBCOMMAND_MODULES and f"{module_name}.".startswith(f"{missing}."):
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``groupless``; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    # the first word that is not an option is the subcommand (the top level has no option with a value)
    command = next((a for a in arguments if not a.startswith("-")), None)
    module = COMMAND_MODULES.get(command or "")
    parser = build_parser(None if module is None else (module,))
    args = parser.parse_args(arguments)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
