#!/usr/bin/env bash
# Create or reuse a virtual environment and install hetero_ns3 into it.
# The one install path shared by the README (scripts/demo.sh, scripts/test.sh), CI (.ci/run) and the
# Docker image (docker/Dockerfile).
#
#   scripts/install.sh [--no-dev] [--no-editable]
#   VENV=/path/to/venv  (default: .venv in the repository)   PYTHON=python3.12 (default: python3)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
extras="[dev]"
editable="-e"
for arg in "$@"; do
  case "$arg" in
    --no-dev) extras="" ;;
    --no-editable) editable="" ;;
    *) echo "install.sh: unknown option $arg (use --no-dev, --no-editable)" >&2; exit 2 ;;
  esac
done

if ! "$python" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 14) else 1)'; then
  echo "install.sh: hetero_ns3 needs Python 3.11-3.13 (the ns3 wheel exists for those); found $("$python" --version 2>&1). Set PYTHON=python3.11." >&2
  exit 2
fi
if ! command -v "${CXX:-g++}" >/dev/null; then
  echo "install.sh: no C++ compiler (${CXX:-g++}); install g++ (Debian/Ubuntu: apt-get install g++)" >&2
  exit 2
fi

if [ ! -x "$venv/bin/python" ]; then
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    # Debian's python3 without python3-venv: fall back to virtualenv from PyPI.
    rm -rf "$venv"
    "$python" -m pip install --quiet --user virtualenv
    "$python" -m virtualenv --quiet "$venv"
  fi
fi

# Reinstall only when the project metadata changed since the last install into this venv.
stamp="$venv/.hetero_ns3_installed"
want="$(cat "$repo/pyproject.toml" | sha256sum | cut -c1-16)${extras}${editable}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet $editable "$repo$extras"
  echo "$want" > "$stamp"
fi
