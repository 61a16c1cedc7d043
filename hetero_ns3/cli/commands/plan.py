"""``hetero-ns3 plan``: resolve and validate a scenario, compile one iteration, print and write the plan."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from hetero_ns3.outputs import check_out_dir
from hetero_ns3.scenario import load_scenario

NAME = "plan"
HELP = "resolve a scenario into per-rank ops, stage layers, per-GPU memory, FLOPs and compute-only MFU"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file")
    p.add_argument(
        "--out", metavar="DIR", help="write plan.json, workload.json, programs.csv and scenario.resolved.json here"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a scenario value, e.g. --set parallelism.tp=4 (repeatable)",
    )
    p.add_argument(
        "--chakra-out",
        metavar="DIR",
        help="also write the workload as per-rank Chakra ET files + comm_group.json (docs/chakra.md)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    p.add_argument("--force", action="store_true", help="plan even when the up-front estimate says it will not fit")
    p.add_argument("--per-rank", action="store_true", help="with --out, also write ops.csv: every rank's ops, expanded")
    p.add_argument(
        "--kernels",
        action="store_true",
        help="also print every kernel of one micro-batch of each layer kind (and of the embedding and output layer) "
        "with its modelled time, FLOPs, bytes and rates (under --json as its 'kernels' list); with --out, write them "
        "to kernels.csv",
    )


def _gib(x: float) -> str:
    return f"{x / 2**30:.1f} GiB"


def format_summary(s: dict) -> str:
    """Human-readable summary of :meth:`CompiledIteration.summary`."""
    par = s["parallelism"]
    lines = [
        f"model      {s['model']}  on {s['gpus']} GPUs {s['gpu_types']}",
        "plan       tp={tp} pp={pp} dp={dp} ep={ep}{etp} cp={cp} vpp={vpp} schedule={schedule} sp={sequence_parallel} "
        "recompute={recompute}{modules} zero={zero_stage} micro_batch={micro_batch} global_batch={global_batch}".format(
            **{
                "cp": 1,
                **par,
                "modules": f"({','.join(par['recomputed'])})" if par.get("recomputed") else "",
                "etp": f" etp={par['etp']}" if par.get("etp", par["tp"]) != par["tp"] else "",
            }
        ),
        *(
            [
                f"peft       LoRA rank {par['lora_rank']} on {','.join(par['lora_modules'])}: base weights frozen, adapters trained"
            ]
            if par.get("peft") == "lora"
            else []
        ),
        f"stages     layers per (virtual) stage {s['stage_layers']}",
        f"replicas   microbatches per replica {s['replica_microbatches']}",
        "layer time "
        + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in s["layer_time_s"].items())
        + " (fwd+bwd, compute)",
        "memory     max per GPU type: " + ", ".join(f"{k} {v:.1f} GiB" for k, v in s["max_memory_GiB_by_type"].items()),
        f"ops        {s['ops']} per-rank ops per iteration ({s['program_ops']} in the compact per-TP-group form)",
        f"FLOPs      {s['model_flops']:.4g} model / {s['executed_flops']:.4g} executed per iteration",
        f"compute    {s['compute_only_iteration_time_s'] * 1e3:.1f} ms per iteration if communication were free; "
        f"MFU {s['mfu_compute_only'] * 100:.1f}% (HFU {s['hfu_compute_only'] * 100:.1f}%)",
    ]
    return "\n".join(lines)


def _kernel_rows(scenario: Any) -> list[Any]:
    """The kernel table of the scenario's plan (:mod:`hetero_ns3.workload.kernel_table`)."""
    from hetero_ns3.workload.kernel_table import kernel_rows
    from hetero_ns3.workload.planner import scenario_step_programs

    progs, types = scenario_step_programs(scenario)
    return kernel_rows(progs, types)


def _kernel_records(rows: list[Any]) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts: a collective's time (NaN, the network's) becomes null."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.record().items()} for r in rows]


def _write_kernels(rows: list[Any], out: Path) -> Path:
    """Write ``kernels.csv`` (columns :data:`hetero_ns3.workload.kernel_table.COLUMNS`) atomically."""
    from hetero_ns3.results.atomic import write_text
    from hetero_ns3.workload.kernel_table import COLUMNS

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(r.record() for r in rows)
    return write_text(out / "kernels.csv", buf.getvalue())


def run(args: argparse.Namespace) -> int:
    from hetero_ns3.limits import check_plan_shape
    from hetero_ns3.workload.planner import plan_scenario

    out = check_out_dir(args.out) if args.out is not None else None
    if args.chakra_out:
        check_out_dir(args.chakra_out, "--chakra-out")
    scenario = load_scenario(args.scenario, args.overrides)
    if scenario.workload is not None and scenario.workload.chakra is not None:
        from hetero_ns3.errors import ScenarioError

        raise ScenarioError(
            f"{args.scenario}: workload.chakra is a trace, not a model to compile; `hetero-ns3 run` imports it "
            "(plan compiles [model] + [parallelism])"
        )
    if scenario.jobs:
        from hetero_ns3.errors import ScenarioError

        raise ScenarioError(
            f"{args.scenario}: plan compiles one [model] + [parallelism], and this scenario has {len(scenario.jobs)} "
            "[[jobs]]; `hetero-ns3 run` plans and simulates every job (docs/multijob.md)"
        )
    check_plan_shape(scenario, force=args.force)
    if scenario.faults.gpus and scenario.cluster is not None and scenario.cluster.topology:
        # what `run` applies while lowering: a selector that matches no GPU is refused here too
        from hetero_ns3.pipeline import gpu_slowdowns, load_run_cluster

        gpu_slowdowns(scenario.faults, load_run_cluster(scenario))
    plan = plan_scenario(scenario)
    summary = plan.summary()
    rows = _kernel_rows(scenario) if args.kernels else None
    if rows is not None and args.json:
        summary["kernels"] = _kernel_records(rows)
    print(json.dumps(summary, indent=1) if args.json else format_summary(summary))
    if rows is not None and not args.json:
        from hetero_ns3.workload.kernel_table import format_rows

        print(format_rows(rows))
    if out is not None:
        paths = plan.write(out)
        (out / "scenario.resolved.json").write_text(json.dumps(scenario.resolved(), indent=1, default=str))
        if args.per_rank:
            df = plan.workload.to_dataframe()
            df["deps"] = df["deps"].map(lambda x: " ".join(map(str, x)))
            df["group"] = df["group"].map(" ".join)
            df.to_csv(out / "ops.csv", index=False)
            paths.append(out / "ops.csv")
        if not args.json:
            print(f"wrote      {', '.join(str(p) for p in [*paths, out / 'scenario.resolved.json'])}")
    if rows is not None and out is not None:
        path = _write_kernels(rows, out)
        if not args.json:
            print(f"wrote      {path}")
    if args.chakra_out:
        from hetero_ns3.workload.chakra_export import export_chakra

        written = export_chakra(plan.workload, args.chakra_out)
        if not args.json:
            print(f"chakra     {len(written) - 1} rank files + {written[-1].name} in {args.chakra_out}")
    return 0
