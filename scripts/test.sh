#!/usr/bin/env bash
# The README's test command: install (dev extras), lint (ruff check + format), type-check (mypy), check the
# C++ style (clang-format, ns-3 rules), run the whole test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
cd "$repo"
bash scripts/install.sh || exit $?
"$venv/bin/ruff" check . || { echo "test.sh: ruff check failed" >&2; exit 1; }
"$venv/bin/ruff" format --check . || { echo "test.sh: ruff format --check failed (run ruff format .)" >&2; exit 1; }
"$venv/bin/mypy" || { echo "test.sh: mypy failed" >&2; exit 1; }
native_sources=$(find hetero_ns3/network/ns3/native -name '*.cc' -o -name '*.h')
# shellcheck disable=SC2086
"$venv/bin/clang-format" --dry-run -Werror $native_sources \
  || { echo "test.sh: clang-format check failed (run clang-format -i on the native sources)" >&2; exit 1; }
"$venv/bin/pytest" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; treating that as a failure" >&2
  exit 1
fi
exit "$rc"
