"""``hetero-ns3 run``: simulate training iterations of a scenario (``run.iterations``, default 1) and write a
run directory."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

NAME = "run"
HELP = (
    "simulate training iterations (run.iterations, default 1; packet level in ns-3, or flow level) "
    "and write a run directory"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file (or a name in scenarios/)")
    from hetero_ns3.network.backend import backend_names

    p.add_argument("--backend", choices=backend_names(), default=None, help="default: [run] backend (ns3)")
    p.add_argument("--out", default=None, help="run directory (default: runs/<scenario>-<backend>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--no-progress", action="store_true", help="do not show progress over simulated time")
    p.add_argument("--profile", action="store_true", help="ns3 backend: print events by kind and per DATA frame")
    p.add_argument("--force", action="store_true", help="run even when the up-front estimate says it will not fit")


class _Progress:
    """One status line on stderr: simulated time, tasks done, wall time."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def __call__(self, sim_s: float, done: int, total: int) -> None:
        line = f"  simulated {sim_s * 1e3:9.3f} ms | tasks {done}/{total} ({100 * done / max(total, 1):5.1f}%) | wall {time.perf_counter() - self.t0:6.1f} s"
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.outputs import check_out_dir
    from hetero_ns3.paths import resolve_preset
    from hetero_ns3.pipeline import run_scenario
    from hetero_ns3.results import format_summary
    from hetero_ns3.scenario.loader import load_scenario

    path = resolve_preset(args.scenario, "scenarios")
    scenario = load_scenario(path, args.overrides)
    backend = args.backend or scenario.run.backend
    out = check_out_dir(args.out if args.out is not None else Path("runs") / f"{path.stem}-{backend}")
    progress = None if args.no_progress else _Progress()
    print(f"hetero-ns3 run: {path.name} on the {backend} backend -> {out}", file=sys.stderr)
    try:
        outcome = run_scenario(scenario, out, backend=backend, progress=progress, force=args.force)
    finally:
        if progress is not None:
            progress.close()
    st = outcome.stats
    print(format_summary(outcome.summary))
    several = st["iterations"] > 1
    per_it = f" ({st['iterations']} iterations x {st['tasks_per_iteration']})" if several else ""
    calls = f"{st['collectives']}" + (" per iteration" if several else "")
    print(
        f"tasks {st['tasks']}{per_it}, flows {st['flows']}, collective calls {calls}; "
        f"compute-only iteration {st['compute_only_iteration_s'] * 1e3:.3f} ms; MFU {100 * st['mfu']:.1f}%; "
        f"planning {st['plan_s']:.1f} s, {outcome.backend} backend {st['backend_wall_s']:.1f} s"
    )
    if args.profile:
        prof = st.get("events_by_kind")
        if prof is None:
            print(f"--profile: the {outcome.backend} backend does not count events by kind (the ns3 backend does)")
        else:
            from hetero_ns3.network.ns3.profile import format_profile

            print(format_profile(prof))
    for job in st.get("jobs", ()):
        alone = (
            f"; alone {job['alone_iteration_time_s'] * 1e3:.3f} ms, slowdown {job['slowdown']:.3f}x"
            if "slowdown" in job
            else ""
        )
        links = job.get("links") or {}
        fabric = (
            f"; fabric {links['fabric_bytes'] / 1e9:.2f} GB, {100 * links['shared_fabric_fraction']:.0f}% on links "
            f"shared with another job, busiest fabric link at {100 * links['fabric_peak_utilisation']:.0f}%"
            if links.get("busiest_link")
            else ""
        )
        print(
            f"job {job['name']}: {job['gpus']} GPUs on nodes {job['nodes']} ({job['placement']}), iteration "
            f"{job['iteration_time_s'] * 1e3:.3f} ms, MFU {100 * job['mfu']:.1f}%{alone}{fabric}"
        )
    print(f"run directory: {outcome.paths.root}")
    return 0
