#!/usr/bin/env bash
# The test command (README, .ci/run): install into .venv, lint, type-check, check layering, run every tier.
# The e2e tier builds the local control plane from the Go module proxy on first use (cached in
# ~/.cache/groupless) and needs Go >= 1.26 on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy (strict on provisioner/)"; .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports
echo "== pytest"
exec .venv/bin/python -m pytest "$@"
