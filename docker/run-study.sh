#!/usr/bin/env bash
# Run a study in the hetero-ns3 container and write its report, results on a mounted volume.
#
#   docker/run-study.sh STUDY [RESULTS_DIR] [sweep options...]
#     STUDY        a study name under scenarios/studies/ (in the image) or a directory with study.toml
#     RESULTS_DIR  host directory mounted at /results (default ./runs); output in RESULTS_DIR/<study name>/
#   e.g. docker/run-study.sh h-levels runs --workers 4
#        docker/run-study.sh ./my-study runs --resume
#   ENGINE=podman (default: docker, else podman)   IMAGE=hetero-ns3 (default)
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
study="$1"; shift
results="${1:-runs}"; [ $# -gt 0 ] && shift
image="${IMAGE:-hetero-ns3}"
engine="${ENGINE:-$(command -v docker >/dev/null && echo docker || echo podman)}"
mkdir -p "$results"
results="$(cd "$results" && pwd)"
mounts=(-v "$results:/results")
if [ -d "$study" ]; then            # a study of the user's: mount it read-only
  host="$(cd "$study" && pwd)"
  name="$(basename "$host")"
  mounts+=(-v "$host:/study/$name:ro")
  target="/study/$name"
else
  name="$study"
  target="/opt/hetero_ns3/scenarios/studies/$study"
fi
"$engine" run --rm "${mounts[@]}" "$image" sweep "$target" --out "/results/$name" --no-progress "$@" || rc=$?
"$engine" run --rm "${mounts[@]}" "$image" report "/results/$name"
echo "run-study.sh: results in $results/$name (report.html, study.parquet, runs/)"
exit "${rc:-0}"
