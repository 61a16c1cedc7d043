#!/usr/bin/env bash
# The README's test command: install (dev extras), lint, run the whole test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
cd "$repo"
bash scripts/install.sh || exit $?
"$venv/bin/ruff" check . || { echo "test.sh: ruff check failed" >&2; exit 1; }
"$venv/bin/pytest" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
