"""Golden end-to-end results: the demo scenario on the flow-level backend, stored as a small JSON file.

The test (tests/e2e/test_golden.py) runs ``hetero-ns3 run scenarios/demo.toml --backend analytic`` and compares
the iteration time, the overall breakdown, the counts and the MFU with ``tests/data/golden/demo-analytic.json``
within :data:`REL_TOL`. A deliberate model change regenerates the file, and only this command does:

    .venv/bin/python tests/golden.py --write

(then say in the commit message why the numbers moved).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden" / "demo-analytic.json"
#: Relative tolerance on every stored figure (the analytic backend is deterministic; this absorbs libm noise).
REL_TOL = 1e-6


def extract(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures a golden file keeps from a run's ``summary.json``."""
    return {
        "iteration_time_s": summary["iteration_time_s"],
        "breakdown_overall": summary["breakdown"]["overall"],
        "breakdown_per_gpu_type": {
            k: {t: v for t, v in row.items() if t != "n_gpus"}
            for k, row in summary["breakdown"]["per_gpu_type"].items()
        },
        "counts": {k: summary["run"][k] for k in ("tasks", "flows", "collectives")},
        "mfu": summary["run"]["mfu"],
    }


def run_demo(out: Path) -> dict[str, Any]:
    """Run the demo on the analytic backend into ``out``; the extracted figures."""
    cmd = [sys.executable, "-m", "hetero_ns3.cli.main", "run", str(REPO / "scenarios" / "demo.toml")]
    cmd += ["--backend", "analytic", "--out", str(out), "--no-progress"]
    subprocess.run(cmd, check=True, cwd=REPO, capture_output=True, text=True)
    return extract(json.loads((out / "summary.json").read_text()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="regenerate the golden file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = run_demo(Path(tmp) / "demo")
    if args.write:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN}")
    else:
        print(json.dumps(got, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
