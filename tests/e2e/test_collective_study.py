"""A ``kind = "collective"`` study: each point equals the matching ``hetero-ns3 collective`` row; its report."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = pytest.mark.e2e


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "hetero_ns3", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_collective_points_match_the_collective_command_and_report(tmp_path):
    d = tmp_path / "coll"
    d.mkdir()
    (d / "study.toml").write_text(
        """
[study]
kind = "collective"
[base.collective]
op = "all_reduce"
algo = "ring"
[base.cluster]
topology = "star:4"
link_rate = "100Gbps"
[base.run]
backend = "analytic"
[axes]
"collective.size" = ["64KiB", "4MiB"]
"collective.protocol" = ["LL", "Simple"]
""",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    res = _cli("sweep", str(d), "--out", str(out), "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    df = pd.read_parquet(out / "study.parquet")
    assert len(df) == 4 and (df["status"] == "ok").all() and (df["algo"] == "ring").all()
    for proto in ("LL", "Simple"):
        ref = _cli("collective", "all_reduce", "--topology", "star:4", "--sizes", "64KiB:4MiB", "--algo", "ring",
                   "--protocol", proto, "--backend", "analytic", "--json", cwd=tmp_path)  # fmt: skip
        assert ref.returncode == 0, ref.stderr
        rows = {r["size_bytes"]: r for r in json.loads(ref.stdout)}
        for _, row in df[df["collective.protocol"] == proto].iterrows():
            want = rows[int(row["size_bytes"])]
            assert row["time_s"] == pytest.approx(want["time_s"], rel=1e-12)
            assert row["busbw_GBps"] == pytest.approx(want["busbw_GBps"], rel=1e-12)
            assert row["protocol"] == proto and row["channels"] == want["channels"]
    rep = _cli("report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert ">Against collective.size</h2>" in html and html.count('src="data:image/png;base64,') == 2
