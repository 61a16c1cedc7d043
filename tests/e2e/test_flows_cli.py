"""``hetero-ns3 flows`` end to end (in-process, real simulator)."""

from __future__ import annotations

import pandas as pd
import pytest

from hetero_ns3.cli.main import main


def _write(tmp_path, text: str):
    p = tmp_path / "flows.csv"
    p.write_text(text)
    return p


@pytest.mark.e2e
@pytest.mark.ns3
@pytest.mark.parametrize("cc", ["hpcc", "dcqcn", "none"])
def test_flows_cli_writes_tables(capi, tmp_path, capsys, cc):
    flows = _write(
        tmp_path, "src,dst,size_bytes,start_s,priority\nh1,h0,200000,0,3\nh2,h0,200000,0.00001,3\nh3,h4,50000,0,1\n"
    )
    out = tmp_path / f"out-{cc}"
    rc = main(["flows", str(flows), "--topology", "leafspine:2,2,3", "--cc", cc, "--out", str(out)])
    assert rc == 0
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0 and "3/3 flows done" in line
    df = pd.read_csv(out / "flows.csv")
    assert list(df.columns) == ["src", "dst", "size_bytes", "start_s", "priority", "finish_s", "fct_s", "slowdown"]
    assert (df["fct_s"] > 0).all() and (df["slowdown"] >= 0.99).all()
    ports = pd.read_csv(out / "ports.csv")
    assert {"tx_bytes", "pfc_pause_sent", "ecn_marks", "drops_lossy_buffer_full", "paused_s"} <= set(ports.columns)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("src,dst,size_bytes,start_s\nh1,h77,100,0\n", "row 0 (line 2), column 'dst': unknown host 'h77'"),
        ("src,dst,size_bytes,start_s\nh1,h0,-100,0\n", "row 0 (line 2), column 'size_bytes'"),
        ("src,dst,start_s\nh1,h0,0\n", "missing column(s) ['size_bytes']"),
        ("", "flows.csv' is empty; write a header line src,dst,size_bytes,start_s[,priority]"),  # was pandas' text
        ("src,dst,size_bytes,start_s\n", "has a header but no flows, so there is nothing to simulate"),  # was exit 0
    ],
)
def test_flows_cli_bad_input_is_one_clear_line(tmp_path, capsys, text, needle):
    flows = _write(tmp_path, text)
    rc = main(["flows", str(flows), "--topology", "star:4", "--out", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
