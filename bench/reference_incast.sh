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
# 15 minutes on one core. Local changes to the reference (bench/reference_patches.py, three bugs that
# SimAI's copy carries and the HPCC artifact does not): `return 0;` at the end of RdmaHw::SendPacketComplete
# (declared int, it falls off its end: undefined behaviour that aborts at -O3 with gcc 12); the INT stack
# offset in SwitchNode (SimAI widened the sequence number to 64 bits but left the 6-byte SeqTs offset, so
# every HPCC hop record overwrote the sequence number and class: crash); QbbNetDevice::Resume looked up
# a queue pair by class index on every RESUME (crash on a host with fewer queue pairs than the class);
# nothing else of its code is changed.
#   PAYLOADS DATA payload sizes (default "4096 1000").
#   EXTRA    more driver arguments, e.g. "--cc=hp --mi=0" or "--cc=none --size=1000000 --buffer-kib=1024".
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
fi
python3 "$here/reference_patches.py" "$sim/src/point-to-point/model"
cp "$here/reference_incast_driver.cc" "$sim/scratch/refcc-incast.cc"
if [ ! -d "$sim/cmake-cache" ]; then
  (cd "$sim" && ./ns3 configure -d optimized --enable-modules=applications,point-to-point \
    --disable-examples --disable-tests --disable-python >/dev/null)
fi
(cd "$sim/cmake-cache" && cmake --build . --target scratch_refcc-incast -j "${JOBS:-1}" >/dev/null)
exe="$(ls "$sim"/build/scratch/ns3.*-refcc-incast-optimized)"
for payload in ${PAYLOADS:-4096 1000}; do
  for seed in $(seq 1 "$seeds"); do
    LD_LIBRARY_PATH="$sim/build/lib" "$exe" --payload="$payload" --seed="$seed" ${EXTRA:-} | grep '^summary'
  done
done
