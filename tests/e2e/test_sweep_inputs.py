"""``hetero-ns3 sweep`` on bad input: one line and exit 2 before any point runs (no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_harness import assert_clean, run_cli

pytestmark = pytest.mark.e2e
DEMO = Path(__file__).resolve().parents[2] / "scenarios" / "demo.toml"
STUDY = f'[study]\nbase = "{DEMO}"\nbackend = "analytic"\n[axes]\n"parallelism.tp" = [4, 2]\n'


@pytest.fixture
def study(tmp_path: Path) -> Path:
    d = tmp_path / "s"
    d.mkdir()
    (d / "study.toml").write_text(STUDY, encoding="utf-8")
    return d


def _fails(argv: list[str], needle: str) -> None:
    res = run_cli(argv)
    assert_clean(res, argv, allowed=(2,))
    assert needle in res.err, (argv, res.err)


def test_out_under_a_pseudo_file_system_or_a_file_is_refused_before_running(study, tmp_path) -> None:
    # used to be a FileNotFoundError traceback from mkdir after the banner, exit 1
    _fails(["sweep", str(study), "--out", "/proc/hetero-sweep"], "--out ('/proc/hetero-sweep') is under /proc")
    (tmp_path / "afile").write_text("x")
    _fails(["sweep", str(study), "--out", str(tmp_path / "afile")], "is a regular file; give a directory")


def test_binary_study_or_base_file_is_one_line(tmp_path) -> None:
    # tomllib.load raised UnicodeDecodeError (a traceback) on a non-UTF-8 study file or base scenario
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "study.toml").write_bytes(b"\xff\xfe[study]\n")
    _fails(["sweep", str(tmp_path / "bin"), "--dry-run"], "study file")
    _fails(["sweep", str(tmp_path / "bin"), "--dry-run"], "is not UTF-8 text: byte 0xff at offset 0")
    (tmp_path / "b.toml").write_text(STUDY.replace(str(DEMO), str(tmp_path / "bin" / "study.toml")))
    _fails(["sweep", str(tmp_path / "b.toml"), "--dry-run"], "study.base (")


def test_a_directory_without_study_toml_is_named_as_such(tmp_path) -> None:
    # used to say "study file '<dir>' does not exist" of a directory that exists
    _fails(["sweep", str(tmp_path), "--dry-run"], f"study directory {str(tmp_path)!r} has no study.toml")


def test_sweep_dot_names_the_study_after_its_folder(study, monkeypatch) -> None:
    # 'sweep .' named the study '.' and wrote to runs/studies/. (the studies folder itself)
    monkeypatch.chdir(study)
    res = run_cli(["sweep", ".", "--dry-run"])
    assert res.rc == 0, res.err
    assert res.err.strip().endswith(f"-> {Path('runs') / 'studies' / 's'}"), res.err


def test_a_study_file_given_to_run_or_plan_points_to_sweep(study) -> None:
    for cmd in ("run", "plan"):
        _fails([cmd, str(study / "study.toml")], "[study] is not a known scenario section")
        _fails([cmd, str(study / "study.toml")], "this is a study file: run it with hetero-ns3 sweep")


def test_a_scheduler_address_that_does_not_parse_is_one_line(study, tmp_path) -> None:
    # 'head' without a port (or an unknown protocol) was a ValueError traceback from dask, exit 1
    pytest.importorskip("distributed")
    for address in ("bogus", "udp://head:8786"):
        argv = ["sweep", str(study), "--out", str(tmp_path / "o"), "--scheduler", address]
        _fails(argv, f"--scheduler ({address!r}) is not a scheduler address")
        assert not (tmp_path / "o").exists()
