"""Subcommand registration (placeholder until this area's issue lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Placeholder: this area's subcommands are added by its issue."""
    del subparsers


def _unused(args: argparse.Namespace) -> int:  # pragma: no cover
    return 0
