#!/usr/bin/env bash
# The README's main job on a small default: install, check the installation, build the native module.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
bash "$repo/scripts/install.sh"
"$venv/bin/hetero-ns3" build
"$venv/bin/hetero-ns3" doctor
