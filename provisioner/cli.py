"""The ``groupless`` command: one entry point, a subcommand per process or tool.

Each area registers its own subcommands (``register(subparsers)`` in its ``cli`` module), so
this file only wires them together and never grows with their options.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

#: The distribution whose metadata gives ``groupless --version``.
DISTRIBUTION = "groupless"


def version() -> str:
    """The installed version of Groupless (``pyproject.toml``'s ``version``), from package metadata.

    ``unknown`` when the package is not installed (run from a source tree without ``pip install``).
    """
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"

#: Modules exposing ``register(subparsers: argparse._SubParsersAction) -> None``.
SUBCOMMAND_MODULES = (
    "webhook.cli",            # groupless webhook
    "certs.cli",              # groupless certs generate
    "extender.cli",           # groupless extender
    "provisioner.app.controller",  # groupless controller
    "provisioner.plan",       # groupless plan
    "localcluster.cli",       # groupless dev-cluster, groupless demo
)

#: Modules an installation may lack: the image leaves the dev cluster (``localcluster``) out,
#: its subcommands run from a checkout.
OPTIONAL_SUBCOMMAND_MODULES = frozenset({"localcluster.cli"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groupless",
        description="Groupless: a groupless node autoscaler for Kubernetes (Karpenter's Provisioner API).",
    )
    parser.add_argument("--version", action="version", version=f"groupless {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in SUBCOMMAND_MODULES:
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
    parser = build_parser()
    args = parser.parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
