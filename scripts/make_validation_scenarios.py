"""Write the Megatron SC'21 validation scenarios, and (``--golden``) regenerate their golden step times.

    PYTHONPATH=. python scripts/make_validation_scenarios.py            # scenario + topology files
    PYTHONPATH=. python scripts/make_validation_scenarios.py --golden   # also megatron_golden.csv
    PYTHONPATH=. python scripts/make_validation_scenarios.py --golden --simulate gpt-145b --keep-others

Output: ``hetero_ns3/data/validation/megatron/<row>.toml`` and ``selene-<nodes>.toml`` (see
:mod:`hetero_ns3.workload.calibration`). The golden table holds, per row, the closed-form step time
(:func:`~hetero_ns3.workload.calibration.estimate_step` with the catalog constants) and, for the rows
that fit this shared 24 GiB machine (``--simulate`` names them; default gpt-1.7b, gpt-3.6b, gpt-7.5b, and
gpt-18b up to gpt-1t, which fit with ``[run] reuse_isolated_collectives = "on"``: about 35 minutes, 10 GiB peak),
the analytic-backend step time. ``--keep-others`` simulates only the ``--simulate`` rows and keeps the
other rows' simulated step times as the CSV has them (adding a row without re-running the others).
``tests/unit/test_megatron_golden.py`` checks both; regenerate only with this command after a
deliberate model change, and say why in the commit.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from hetero_ns3.compute.roofline import Roofline
from hetero_ns3.workload.calibration import estimate_step, load_rows, scenario_toml, topology_toml

DATA = Path(__file__).resolve().parents[1] / "hetero_ns3" / "data" / "validation"
OUT = DATA / "megatron"
GOLDEN = DATA / "megatron_golden.csv"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golden", action="store_true", help="regenerate megatron_golden.csv")
    ap.add_argument(
        "--simulate",
        default="gpt-1.7b,gpt-3.6b,gpt-7.5b,gpt-18b,gpt-39b,gpt-76b,gpt-145b,gpt-310b,gpt-530b,gpt-1t",
        help="comma-separated rows to simulate for the golden table (default: every row; 18B up with reuse_isolated_collectives)",
    )
    ap.add_argument(
        "--keep-others",
        action="store_true",
        help="keep the simulated step time of the rows not in --simulate as megatron_golden.csv has it",
    )
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for row in load_rows():
        (OUT / f"{row.name}.toml").write_text(scenario_toml(row))
        (OUT / f"selene-{row.gpus // 8}.toml").write_text(topology_toml(row))
    print(f"wrote {len(load_rows())} scenarios under {OUT}")
    if not args.golden:
        return
    from hetero_ns3.validation import simulate_scenario

    sim = set(filter(None, args.simulate.split(",")))
    kept: dict[str, str] = {}
    if args.keep_others and GOLDEN.exists():
        with open(GOLDEN, newline="") as fh:
            kept = {
                r["row"]: r["simulated_step_s"] for r in csv.DictReader(line for line in fh if not line.startswith("#"))
            }
    rf = Roofline("fp16")
    rows = []
    for row in load_rows():
        closed = estimate_step(row, rf).total_s
        simulated = simulate_scenario(OUT / f"{row.name}.toml")["step_time_s"] if row.name in sim else None
        rows.append(
            {
                "row": row.name,
                "published_step_s": f"{row.published_step_s:.6f}",
                "closed_form_step_s": f"{closed:.6f}",
                "simulated_step_s": kept.get(row.name, "") if simulated is None else f"{simulated:.6f}",
            }
        )
        print(rows[-1])
    with open(GOLDEN, "w", newline="") as fh:
        fh.write(
            "# Golden step times of the Megatron SC'21 rows; regenerate: scripts/make_validation_scenarios.py --golden\n"
        )
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
