"""Start-up cost of the ns3 backend: the C ABI (ctypes) run path against the cppyy path.

Each measurement runs in a fresh Python process (the library is already in the cache, as after
``hetero-ns3 build``):

- ``first_event``: wall time from launching the process until the first simulated event has
  run (a one-flow network on star:2, after imports, configuration and network construction), and
  the process's peak RSS at that point.
- ``collective``: ``hetero-ns3 collective all_reduce --topology star:2 --gpus 2 --sizes 1KiB
  --backend ns3``, whole-process wall time and peak RSS.

``--engine cppyy`` routes the same calls through cppyy (``from ns import ns``), which is what every
ns3-backend command paid before the C ABI. Timings on a shared machine are noisy: compare the two
engines measured in one invocation (``--repeat`` takes the median).

    python bench/bench_startup.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_FIRST_EVENT = """
import json, resource, sys, time
import pandas as pd
from hetero_ns3.network.ns3.roce import make_engine, make_network
from hetero_ns3.topology import resolve_topology
eng = make_engine(sys.argv[1])
graph = resolve_topology("star:2", 100e9, 1e-6)
net = make_network(eng, graph)
net.add_flows([0], [1], [1024], [3], [0.0])
eng.run_for(1e-9)  # runs the events at t = 0 (the flow's start)
assert eng.event_count() > 0
t = time.time()
ru = resource.getrusage(resource.RUSAGE_SELF)
rss, cpu = ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime
eng.destroy()
net.free()
print(json.dumps({"t_first_event": t, "rss_bytes": rss, "cpu_s": cpu}))
"""

_COLLECTIVE = """
import functools, sys
if sys.argv[1] == "cppyy":
    from hetero_ns3.network.ns3 import replay
    replay.run_plan = functools.partial(replay.run_plan, engine="cppyy")
from hetero_ns3.cli.main import main
sys.exit(main(["collective", "all_reduce", "--topology", "star:2", "--gpus", "2", "--sizes", "1KiB",
               "--backend", "ns3"]))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def _first_event(engine: str) -> tuple[float, int, float]:
    """(wall s from launching a fresh interpreter to its first simulated event, its peak RSS bytes and CPU s then)."""
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", _FIRST_EVENT, engine], capture_output=True, text=True, env=_env(), check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{engine}: child failed ({proc.returncode}):\n{proc.stderr}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    return rec["t_first_event"] - t0, rec["rss_bytes"], rec["cpu_s"]


def _collective(engine: str) -> tuple[float, int, float]:
    """(wall s, peak RSS bytes, CPU s) of the collective CLI in a fresh interpreter.

    A helper process launches it, so ``RUSAGE_CHILDREN`` holds that one child's peak RSS only.
    """
    code = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.time()\n"
        f"p = subprocess.run([sys.executable, '-c', {_COLLECTIVE!r}, {engine!r}], capture_output=True)\n"
        "wall = time.time() - t0\n"
        "assert p.returncode == 0, p.stderr\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(wall, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime)\n"
    )
    line = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    wall, rss, cpu = line.stdout.split()
    return float(wall), int(rss), float(cpu)


def measure(engine: str) -> dict[str, float]:
    first, rss_first, cpu_first = _first_event(engine)
    cwall, crss, ccpu = _collective(engine)
    return {
        "first_event_s": first,
        "first_event_cpu_s": cpu_first,
        "first_event_rss_mib": rss_first / 2**20,
        "collective_wall_s": cwall,
        "collective_cpu_s": ccpu,
        "collective_rss_mib": crss / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["capi", "cppyy", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=3, help="runs per engine (median reported)")
    args = ap.parse_args(argv)
    engines = ["capi", "cppyy"] if args.engine == "both" else [args.engine]
    from hetero_ns3.network.native_build import build_module

    build_module()  # the cache is warm for every child
    rows = {}
    for eng in engines:
        runs = [measure(eng) for _ in range(args.repeat)]
        rows[eng] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(eng, json.dumps({k: round(v, 3) for k, v in rows[eng].items()}), flush=True)
    if len(rows) == 2:
        print("ratio cppyy/capi", json.dumps({k: round(rows["cppyy"][k] / rows["capi"][k], 1) for k in rows["capi"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
