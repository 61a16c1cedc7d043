"""``run.tables`` / ``run.trace``: the size and write time of a run directory with every file (the default) and
with Parquet tables alone and no trace, for the same scenario, side by side in one run, values checked equal.

Default scenario: one point of the ``moe-dispatch`` study (Qwen3-30B-A3B, EP 16, FP8, 4 DGX H100; 8.9 M
tasks), whose run directory is about 1.1 GB with every file. Each variant runs ``--repeat`` times, in
alternation, each in a fresh directory; the median wall time is reported.

    .venv/bin/python bench/bench_run_outputs.py [--repeat 2] [--scenario FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_sweep import timed

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "scenarios" / "studies" / "moe-dispatch"


def _moe_point(tmp: Path) -> Path:
    """The study's base with ``parallelism.ep = 16`` as a scenario file (the study's own base, not a copy)."""
    from hetero_ns3.studies.spec import load_study_file

    study = load_study_file(STUDY / "study.toml")
    base = json.loads(json.dumps(study.base))
    base["parallelism"]["ep"] = 16
    base["cluster"]["topology"] = str(STUDY / base["cluster"]["topology"])
    base.setdefault("run", {})["backend"] = "analytic"
    lines = []
    for section, table in base.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    path = tmp / "moe16.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _size_mb(d: Path) -> float:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--scenario", default=None, help="scenario file (default: one moe-dispatch point)")
    args = ap.parse_args()
    sets = {
        "every file (default)": [],
        'tables = ["parquet"], trace = false': ["--set", 'run.tables=["parquet"]', "--set", "run.trace=false"],
    }
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        scenario = Path(args.scenario) if args.scenario else _moe_point(tmp)
        variants: dict[str, list[float]] = {name: [] for name in sets}
        sizes: dict[str, float] = {}
        values: dict[str, float] = {}
        for i in range(args.repeat):
            for j, (name, extra) in enumerate(sets.items()):
                out = tmp / f"run{i}-{j}"
                cmd = [sys.executable, "-m", "hetero_ns3", "run", str(scenario), "--out", str(out), "--no-progress"]
                variants[name].append(timed(cmd + extra, ROOT))
                sizes[name] = _size_mb(out)
                values[name] = json.loads((out / "summary.json").read_text())["iteration_time_s"]
                shutil.rmtree(out)
    if len(set(values.values())) != 1:
        raise SystemExit(f"iteration times differ between the variants: {values}")
    base = "every file (default)"
    w0, s0 = statistics.median(variants[base]), sizes[base]
    print(f"iteration time {values[base]:.6f} s in both; median of {args.repeat} runs each")
    print("| files | run directory, MB | ratio | wall s (whole command) | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name, walls in variants.items():
        w, s = statistics.median(walls), sizes[name]
        print(f"| {name} | {s:.0f} | {s0 / s:.1f}x smaller | {w:.1f} | {w0 / w:.2f}x faster |")


if __name__ == "__main__":
    main()
