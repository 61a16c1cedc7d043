#!/usr/bin/env bash
# The reference side of docs/roce.md "The 8-to-1 incast" / "Reference implementation": builds the HPCC
# artifact's RDMA model as carried by aliyun/ns-3-alibabacloud (SimAI) at c2bfbf4, with our scratch driver
# bench/reference_incast_driver.cc, and runs the issue-14 incast per payload size and seed. Prints the
# `summary` lines of the driver (compare with bench/reference_incast.py, our side). Not run by the tests.
#
# Usage: bench/reference_incast.sh [WORKDIR] [SEEDS]
#   WORKDIR  where the reference is unpacked and built (default /tmp/hetero-ns3-reference); outside the repo.
#   SEEDS    number of seeds per payload size (default 30).
#   REF_GIT  a git directory of aliyun/ns-3-alibabacloud holding c2bfbf4 (default: clone from GitHub).
#   JOBS     build jobs (default 1).
# The build (core, network, internet, point-to-point, applications and their dependencies) takes about
# 15 minutes on one core. Local change to the reference: `return 0;` at the end of
# RdmaHw::SendPacketComplete (declared int, it falls off its end: undefined behaviour that aborts at -O3
# with gcc 12); nothing else of its code is changed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${1:-/tmp/hetero-ns3-reference}"
seeds="${2:-30}"
commit=c2bfbf4
mkdir -p "$work"
sim="$work/simulation"
if [ ! -d "$sim" ]; then
  git_dir="${REF_GIT:-}"
  if [ -z "$git_dir" ]; then
    git clone --quiet https://github.com/aliyun/ns-3-alibabacloud "$work/clone"
    git_dir="$work/clone/.git"
  fi
  git --git-dir="$git_dir" archive "$commit" simulation | tar -x -C "$work"
  python3 - "$sim/src/point-to-point/model/rdma-hw.cc" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = "\tPtr<QbbNetDevice> dev = m_nic[nic_idx].dev;\n\tSendComplete(qp);\n}"
assert text.count(old) == 1, "RdmaHw::SendPacketComplete not found as expected"
open(path, "w").write(text.replace(old, old[:-1] + "\treturn 0; // hetero_ns3: fell off its end (UB)\n}"))
PY
fi
cp "$here/reference_incast_driver.cc" "$sim/scratch/refcc-incast.cc"
if [ ! -d "$sim/cmake-cache" ]; then
  (cd "$sim" && ./ns3 configure -d optimized --enable-modules=applications,point-to-point \
    --disable-examples --disable-tests --disable-python >/dev/null)
fi
(cd "$sim/cmake-cache" && cmake --build . --target scratch_refcc-incast -j "${JOBS:-1}" >/dev/null)
exe="$(ls "$sim"/build/scratch/ns3.*-refcc-incast-optimized)"
for payload in 4096 1000; do
  for seed in $(seq 1 "$seeds"); do
    LD_LIBRARY_PATH="$sim/build/lib" "$exe" --payload="$payload" --seed="$seed" | grep '^summary'
  done
done
