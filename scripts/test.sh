#!/usr/bin/env bash
# The test command (README, .ci/run): install into .venv, lint, type-check, check layering, run the tests.
#
#   bash scripts/test.sh                       every tier: unit, component, integration, e2e
#   bash scripts/test.sh unit                  one tier: unit, component, integration or e2e (several may be named)
#   bash scripts/test.sh integration -m "not needs_go" -x   what follows the tier names goes to pytest as it is
#   bash scripts/test.sh tests/unit/api -k defaults        so do paths
#
# The e2e tier builds the local control plane from the Go module proxy on first use (cached in
# ~/.cache/groupless) and needs Go >= 1.26 on PATH; the integration tier's chart tests build helm
# the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
echo "== ruff"; .venv/bin/ruff check .
echo "== mypy (strict, every package)"; .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports
# leading tier names become their directories; the rest goes to pytest untouched
tiers=()
while [ $# -gt 0 ]; do
  case "$1" in
    unit|component|integration|e2e) tiers+=("tests/$1"); shift ;;
    *) break ;;
  esac
done
echo "== pytest ${tiers[*]:-} $*"
exec .venv/bin/python -m pytest ${tiers[@]+"${tiers[@]}"} "$@"
