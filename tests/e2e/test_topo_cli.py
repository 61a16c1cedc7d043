"""``hetero-ns3 topo show`` end to end (in process, through the CLI's main)."""

from __future__ import annotations

import json

import pytest

from hetero_ns3.cli.main import main

pytestmark = pytest.mark.e2e


def test_show_preset_summary(capsys):
    assert main(["topo", "show", "h3"]) == 0
    out = capsys.readouterr().out
    assert "64 x H100-SXM, 32 x A100-SXM-80GB, 32 x L40S (128 total)" in out
    assert "bisection bandwidth: 8Tbps" in out
    assert "n0.g0 -> n15.g7: 8" in out  # cross-rail: one path per spine
    assert "oversubscription (downlink/uplink, worst switch): rail 0.75" in out  # 4.8T down, 6.4T up


def test_show_json_and_plot(tmp_path, capsys):
    png = tmp_path / "t.png"
    assert main(["topo", "show", "a100-fattree", "--json", "--plot", str(png), "--pair", "n0.g0", "n8.g0"]) == 0
    text = capsys.readouterr().out
    d = json.loads(text[: text.rindex("}") + 1])
    assert d["gpus_by_type"] == {"A100-SXM-80GB": 128}
    assert d["switches_by_role"]["core"] == 16
    assert d["ecmp_paths"] == [["n0.g0", "n8.g0", 16]]  # NICs in different pods: (k/2)^2 paths
    assert png.stat().st_size > 10_000


def test_show_inline(capsys):
    assert main(["topo", "show", "leafspine:4,2,8"]) == 0
    assert "bisection bandwidth: 400Gbps" in capsys.readouterr().out


def test_list(capsys):
    assert main(["topo", "list"]) == 0
    assert {"h0", "h4", "dgx-h100-rail"} <= set(capsys.readouterr().out.split())


@pytest.mark.parametrize("spec", ["torus:3", "no-such-preset"])
def test_bad_topology_exits_2(spec, capsys):
    assert main(["topo", "show", spec]) == 2
    assert "ScenarioError" in capsys.readouterr().err


def test_bad_pair_exits_2(capsys):
    assert main(["topo", "show", "h0", "--pair", "n0.g0", "n99.g0"]) == 2
    assert "n99.g0" in capsys.readouterr().err
