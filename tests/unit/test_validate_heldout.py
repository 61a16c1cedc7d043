"""Held-out cases (issue 14): the ``heldout`` flag, ``validate --heldout``, suite-relative topologies."""

from __future__ import annotations

import json
import tomllib

import pytest

from hetero_ns3.cli.main import main
from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.loader import load_scenario
from hetero_ns3.validation import SUITE_PATH, load_suite

# One held-out case that fits its tolerance, one that misses, one plain case: --heldout must run
# exactly the first two and count both (a held-out miss fails the exit status like any other).
_SUITE = """
[[case]]
name = "plain"
kind = "collective"
op = "all_reduce"
topology = "a100-fattree"
ranks = ["n0.g0", "n1.g0"]
size = 1073741824
metric = "busbw_GBps"
published = 24.0
tolerance = 0.10
source = "nccl-tests #119"

[[case]]
name = "held.ok"
heldout = true
kind = "collective"
op = "all_reduce"
topology = "topo/one-node.toml"
gpus = 8
size = 4294967296
metric = "busbw_GBps"
published = 475.0
tolerance = 0.10
source = "nccl-tests #272"

[[case]]
name = "held.miss"
heldout = true
kind = "collective"
op = "all_reduce"
topology = "topo/one-node.toml"
gpus = 8
size = 4294967296
metric = "busbw_GBps"
published = 900.0
tolerance = 0.10
source = "deliberately wrong"
"""


@pytest.fixture()
def suite(tmp_path):
    (tmp_path / "topo").mkdir()
    src = SUITE_PATH.parent / "heldout" / "hgx-h200-1.toml"
    (tmp_path / "topo" / "one-node.toml").write_text(src.read_text())
    p = tmp_path / "suite.toml"
    p.write_text(_SUITE)
    return p


def test_heldout_flag_parsed(suite) -> None:
    _base, cases = load_suite(suite)
    assert [c.heldout for c in cases] == [False, True, True]


def test_validate_heldout_runs_only_heldout_and_counts_misses(suite, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    # the topology path is relative to the suite file, not to the working directory
    assert main(["validate", "--suite", str(suite), "--heldout", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "plain" not in text.split("\n", 1)[1]
    records = json.loads((out / "validation.json").read_text())
    assert [r["case"] for r in records] == ["held.ok", "held.miss"]
    assert all(r["heldout"] for r in records)
    assert [r["within_tolerance"] for r in records] == [True, False]
    assert "1/2 counted cases within tolerance" in text


def test_heldout_must_be_boolean(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        '[[case]]\nname = "x"\nkind = "collective"\nmetric = "busbw_GBps"\npublished = 1\ntolerance = 0.1\n'
        'source = "s"\nheldout = "yes"\n'
    )
    with pytest.raises(ScenarioError, match=r"case\[0\]\.heldout"):
        load_suite(p)


def test_shipped_heldout_cases_have_sources_and_files() -> None:
    base, cases = load_suite()
    held = [c for c in cases if c.heldout]
    assert len(held) >= 15
    sources = (base / "heldout_sources.md").read_text()
    for c in held:
        assert not c.quick, c.name  # validate --quick stays the calibration set
        url = c.source.split()[0]
        assert url.startswith("https://") and url in sources, c.name
        if c.kind == "scenario":
            with open(base / c.scenario, "rb") as fh:
                tomllib.load(fh)
            load_scenario(base / c.scenario, list(c.overrides))  # every field valid with the case's overrides
        elif c.topology.endswith(".toml"):
            assert (base / c.topology).is_file(), c.name
