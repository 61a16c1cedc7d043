"""A run without flows (every call fused, or a single GPU) writes a flows table whose text columns are text."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hetero_ns3.pipeline import run_scenario
from hetero_ns3.scenario.loader import scenario_from_dict

REPO = Path(__file__).resolve().parent.parent.parent


def test_empty_flows_table_keeps_its_column_types(tmp_path) -> None:
    # TP 4 on one 4-GPU node: the only group is isolated, so the default `auto` fuses every call (no flows).
    sc = scenario_from_dict(
        {
            "model": {"name": "gpt3-125m", "layers": 2, "seq_len": 128},
            "parallelism": {"tp": 4, "global_batch": 2, "micro_batch": 1},
            "cluster": {"topology": str(REPO / "tests" / "data" / "one-node-4gpu.toml")},
            "run": {"backend": "analytic"},
        }
    )
    out = run_scenario(sc, tmp_path / "run")
    assert out.stats["flows"] == 0 and out.stats["fused_collectives"]["fused_calls"] > 0
    schema = pq.read_schema(tmp_path / "run" / "flows.parquet")
    for col in ("src", "dst", "src_node", "dst_node", "category", "collective", "label"):
        assert schema.field(col).type == pa.string(), col
    assert schema.field("fct_s").type == pa.float64() and schema.field("intra_node").type == pa.bool_()
