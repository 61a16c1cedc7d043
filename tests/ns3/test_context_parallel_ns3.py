"""Context parallelism on the packet backend: the KV ring's flows run as real packets in ns-3 (NVLink inside a
node), each finishing no earlier than its ideal transfer time, and both backends carry the same ring traffic."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.cli_harness import assert_clean, run_cli

pytestmark = pytest.mark.ns3

TWO_NODE = Path(__file__).resolve().parents[1] / "data" / "two-node-h100.toml"


def _run(tmp_path: Path, backend: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    scen = tmp_path / f"cp-{backend}.toml"
    scen.write_text(
        '[model]\nname = "gpt3-125m"\nseq_len = 512\n\n[parallelism]\ntp = 2\npp = 2\ncp = 2\nglobal_batch = 4\n'
        'micro_batch = 1\nsequence_parallel = true\norder = "tp-dp-pp"\n\n'
        f'[cluster]\ntopology = "{TWO_NODE}"\n\n[run]\nbackend = "{backend}"\n'
    )
    out = tmp_path / backend
    argv = ["run", str(scen), "--out", str(out), "--no-progress"]
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(0,))
    return pd.read_csv(out / "flows.csv"), pd.read_csv(out / "tasks.csv")


def test_kv_ring_runs_as_packets(tmp_path) -> None:
    flows, _tasks = _run(tmp_path, "ns3")
    ring = flows[flows.category == "cp"]
    assert len(ring) and ring.intra_node.all()
    assert ring.finish_s.notna().all()
    assert (ring.fct_s >= ring.ideal_fct_s * (1 - 1e-9)).all()
    ana, _ = _run(tmp_path, "analytic")
    key = ["src", "dst", "size_bytes"]
    assert sorted(map(tuple, ring[key].to_numpy())) == sorted(map(tuple, ana[ana.category == "cp"][key].to_numpy()))
