"""``hetero-ns3 validate --quick`` passes inside the test suite; suite files fail cleanly."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from hetero_ns3.cli.main import main
from hetero_ns3.errors import ScenarioError, SimulationError
from hetero_ns3.validation import load_suite, run_cases


def test_validate_quick_passes_and_writes_tables(tmp_path, capsys) -> None:
    assert main(["validate", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "megatron.gpt-1.7b" in out and "counted cases within tolerance" in out
    records = json.loads((tmp_path / "validation.json").read_text())
    run = [r for r in records if r["simulated"] is not None]
    assert run and all(r["within_tolerance"] for r in run if not r["pending"])
    assert all(r["source"] for r in records)
    with open(tmp_path / "validation.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(records)
    # each record names its kind and the GPU types it simulates; the scorecard follows the table
    by_name = {r["case"]: r for r in records}
    assert by_name["megatron.gpt-1.7b"]["kind"] == "scenario"
    assert by_name["megatron.gpt-1.7b"]["gpu_types"] == "A100-SXM-80GB"
    assert by_name["nccl.h100x8.all_reduce.1GiB"]["gpu_types"] == "H100-SXM"
    assert by_name["h200.layer.llama2-7b-tp1"]["gpu_types"] == "H200-SXM"
    assert "calibration / training" in out and "calibration / collective" in out
    page = (tmp_path / "validation.html").read_text()
    assert "<h2>Scorecard</h2>" in page and "megatron.gpt-1.7b" in page


def test_suite_cases_are_complete() -> None:
    _base, cases = load_suite()
    names = {c.name for c in cases}
    assert len(names) == len(cases)
    assert sum(n.startswith("megatron.") for n in names) == 10
    assert "megatron-core.gpt3-175b.h100x128" in names
    for c in cases:
        assert c.source and c.published > 0 and 0 < c.tolerance < 1


def test_bad_suite_names_the_field(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        '[[case]]\nname = "x"\nkind = "movie"\nmetric = "step_time_s"\npublished = 1\ntolerance = 0.1\nsource = "s"\n'
    )
    with pytest.raises(ScenarioError, match=r"case\[0\]\.kind"):
        load_suite(p)


def test_failing_case_exits_1(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        '[[case]]\nname = "nic"\nkind = "collective"\nop = "all_reduce"\ntopology = "a100-fattree"\n'
        'ranks = ["n0.g0", "n1.g0"]\nsize = 1073741824\nmetric = "busbw_GBps"\npublished = 48.0\n'
        'tolerance = 0.05\nsource = "deliberately wrong: an HDR NIC does not reach 48 GB/s"\n'
    )
    assert main(["validate", "--suite", str(p)]) == 1


def test_a_case_that_cannot_be_simulated_is_recorded_and_the_rest_kept(tmp_path, capsys) -> None:
    """A case whose scenario does not load is a FAILED row naming the error; the cases before and after it still
    run, the tables (rewritten after every case) hold them all, and the exit status is 2 (bad input)."""
    (tmp_path / "bad.toml").write_text('[model]\nname = "no-such-model"\n')
    nic = (
        'kind = "collective"\nop = "all_reduce"\ntopology = "a100-fattree"\nranks = ["n0.g0", "n1.g0"]\n'
        'size = 1073741824\nmetric = "busbw_GBps"\npublished = 24.0\ntolerance = 0.05\nsource = "HDR NIC ceiling"\n'
    )
    bad = 'kind = "scenario"\nscenario = "bad.toml"\nmetric = "step_time_s"\npublished = 1\ntolerance = 0.1\nsource = "s"\n'
    suite = tmp_path / "s.toml"
    suite.write_text(f'[[case]]\nname = "a"\n{nic}\n[[case]]\nname = "b"\n{bad}\n[[case]]\nname = "c"\n{nic}')
    out = tmp_path / "out"
    assert main(["validate", "--suite", str(suite), "--out", str(out)]) == 2
    printed = capsys.readouterr()
    assert "FAILED: ScenarioError" in printed.out and "no-such-model" in printed.out
    assert "1 case(s) could not be simulated: b" in printed.err
    records = {r["case"]: r for r in json.loads((out / "validation.json").read_text())}
    assert records["a"]["within_tolerance"] and records["c"]["within_tolerance"]
    assert records["b"]["simulated"] is None and records["b"]["within_tolerance"] is False
    assert "no-such-model" in records["b"]["failure"] and records["a"]["failure"] is None
    with open(out / "validation.csv") as fh:
        assert [r["case"] for r in csv.DictReader(fh)] == ["a", "b", "c"]
    # the scorecard counts the failed case as a case not within tolerance, without an error
    assert "[1 failed]" in printed.out
    assert 'class="failed"' in (out / "validation.html").read_text()


def test_set_is_a_what_if_and_baseline_shows_what_changed(tmp_path, capsys) -> None:
    """``--set`` reaches the training cases only (recorded per case), and ``--baseline`` lists exactly the cases
    whose value moved, with both scorecards over the shared cases, in the printout and on the page."""
    cases = ["--case", "megatron.gpt-1.7b", "--case", "nic.hdr200.all_reduce.2ranks"]
    base = tmp_path / "base"
    assert main(["validate", *cases, "--out", str(base)]) == 0
    capsys.readouterr()
    what_if = tmp_path / "what-if"
    argv = ["validate", *cases, "--set", "compute.launch_overhead=20us", "--baseline", str(base), "--out", str(what_if)]
    main(argv)  # exit status: whatever the what-if gives against the tolerance
    out = capsys.readouterr().out
    before = {r["case"]: r for r in json.loads((base / "validation.json").read_text())}
    after = {r["case"]: r for r in json.loads((what_if / "validation.json").read_text())}
    assert after["megatron.gpt-1.7b"]["set"] == "compute.launch_overhead=20us"
    assert after["nic.hdr200.all_reduce.2ranks"]["set"] == ""  # collectives ignore --set
    assert after["megatron.gpt-1.7b"]["simulated"] > before["megatron.gpt-1.7b"]["simulated"]  # 3 -> 20 us per kernel
    assert after["nic.hdr200.all_reduce.2ranks"]["simulated"] == before["nic.hdr200.all_reduce.2ranks"]["simulated"]
    assert "2 counted cases in common, 1 changed" in out
    assert "baseline, same cases:" in out and "this run, same cases:" in out
    page = (what_if / "validation.html").read_text()
    assert "<h2>Against the baseline</h2>" in page and "compute.launch_overhead=20us" in page
    assert json.loads((what_if / "baseline.json").read_text()) == list(before.values())


def test_bad_set_and_baseline_fail_before_any_case(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["validate", "--quick", "--set", "compute.no_such_key=1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no_such_key" in err and "Traceback" not in err
    assert not (out / "validation.json").exists()
    assert main(["validate", "--quick", "--baseline", str(tmp_path / "nothing")]) == 2
    assert "--baseline" in capsys.readouterr().err


def test_workers_give_the_serial_results_in_suite_order(tmp_path, capsys) -> None:
    """``--workers 2`` runs each case in its own spawned process: the same values to the last digit as one
    process, the tables in the suite's order whatever order the workers finish in."""
    cases = [
        "--case",
        "megatron.gpt-1.7b",
        "--case",
        "nic.hdr200.all_reduce.2ranks",
        "--case",
        "h200.layer.llama2-7b-tp1",
    ]
    assert main(["validate", *cases, "--out", str(tmp_path / "one")]) == 0
    assert main(["validate", *cases, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    one = json.loads((tmp_path / "one" / "validation.json").read_text())
    two = json.loads((tmp_path / "two" / "validation.json").read_text())
    order = ["megatron.gpt-1.7b", "nic.hdr200.all_reduce.2ranks", "h200.layer.llama2-7b-tp1"]  # the suite's
    assert [r["case"] for r in one] == [r["case"] for r in two] == order
    assert [r["simulated"] for r in one] == [r["simulated"] for r in two]
    capsys.readouterr()
    assert main(["validate", "--quick", "--workers", "0"]) == 2
    assert "--workers (0) must be >= 1" in capsys.readouterr().err


def test_an_unexpected_error_in_a_worker_names_its_case() -> None:
    """An error that is not an input or planning error (a bug: here a metric the case does not produce) ends a
    ``--workers`` run with one line naming the case and the error, after the outcomes of the cases before it."""
    base, cases = load_suite()
    good = next(c for c in cases if c.name == "nic.hdr200.all_reduce.2ranks")
    bad = dataclasses.replace(good, name="broken", metric="no_such_metric")
    seen = []
    with pytest.raises(
        SimulationError, match=r"case 'broken' failed in its worker process: KeyError: 'no_such_metric'"
    ):
        for i, outcome in run_cases([good, bad], base, workers=2):
            seen.append((i, outcome.case.name))
    assert seen in ([], [(0, good.name)])  # the good case is yielded unless the bad one's worker answered first


def test_case_patterns_and_list(capsys) -> None:
    """``--case`` takes shell-style patterns as well as names; ``--list`` prints the selection and runs nothing; a
    pattern that selects nothing exits 2 naming it, with the closest names."""
    _, cases = load_suite()
    oss = sorted(c.name for c in cases if c.name.startswith("heldout.mbridge.gpt-oss-120b."))
    assert len(oss) >= 2
    assert main(["validate", "--list", "--case", "heldout.mbridge.gpt-oss-120b.*", "--case", "megatron.gpt-1.7b"]) == 0
    out = capsys.readouterr().out
    listed = [ln.split()[0] for ln in out.splitlines()[1:-1]]
    assert sorted(listed) == sorted([*oss, "megatron.gpt-1.7b"])
    assert listed.index("megatron.gpt-1.7b") < listed.index(oss[0])  # the suite's order, not the arguments'
    assert out.splitlines()[-1] == f"{len(oss) + 1} case(s)" and "simulated" not in out
    assert main(["validate", "--list", "--quick"]) == 0
    quick = capsys.readouterr().out
    assert f"{sum(c.quick for c in cases)} case(s)" in quick and all("quick" in ln for ln in quick.splitlines()[1:-1])
    assert main(["validate", "--list", "--case", "megatron.gpt-17b"]) == 2
    err = capsys.readouterr().err
    assert (
        "--case ('megatron.gpt-17b') matches no case" in err and "megatron.gpt-1.7b" in err and "Traceback" not in err
    )
