#!/usr/bin/env bash
# Create or reuse a virtual environment and install hetero_ns3 into it.
# The one install path shared by the README (scripts/demo.sh, scripts/test.sh), CI (.ci/run) and the
# Docker image (docker/Dockerfile).
#
#   scripts/install.sh [--no-dev] [--no-editable] [--extras cluster,notebooks] [--browser]
#     --extras    optional extras to install besides (or, with --no-dev, instead of) dev
#     --browser   also install a headless Chromium (Debian/Ubuntu apt-get, as root) when none is found:
#                 the report test loads pages in it (it is skipped, with its reason, where none exists)
#   VENV=/path/to/venv  (default: .venv in the repository)   PYTHON=python3.12 (default: python3)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
dev="dev"
more=""
editable="-e"
browser=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-dev) dev="" ;;
    --no-editable) editable="" ;;
    --extras) shift; more="${1:-}" ;;
    --browser) browser=1 ;;
    *) echo "install.sh: unknown option $1 (use --no-dev, --no-editable, --extras LIST, --browser)" >&2; exit 2 ;;
  esac
  shift
done
extras="$(echo "$dev,$more" | sed 's/^,//; s/,$//')"
[ -n "$extras" ] && extras="[$extras]"

if [ "$browser" = 1 ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
      || echo "install.sh: could not install chromium; the browser test will be skipped" >&2
  else
    echo "install.sh: no chromium and no root apt-get; the browser test will be skipped" >&2
  fi
fi

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
