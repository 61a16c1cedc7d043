#!/usr/bin/env bash
# The README's main job on a small default: install, build the native module, then simulate one
# training iteration of scenarios/demo.toml packet by packet in ns-3 (about a minute here).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
bash "$repo/scripts/install.sh"
"$venv/bin/hetero-ns3" build
"$venv/bin/hetero-ns3" run "$repo/scenarios/demo.toml" --out "${DEMO_OUT:-$repo/runs/demo}" "$@"
