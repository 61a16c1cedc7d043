"""Issue 17's corpus: every bad input a one-line error (exit 2), checked before work starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.paths import preset_dir
from tests.cli_harness import assert_clean, run_cli

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scenarios" / "demo.toml"
EXAMPLE = REPO / "scenarios" / "plan_example.toml"
H0 = preset_dir("topologies") / "h0.toml"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    out = {"dir": d}
    (d / "bin.toml").write_bytes(b"\xff\xfe\x00\x01binary\x80")
    (d / "latin1.toml").write_bytes('[model]\nname = "caf\xe9"\n'.encode("latin-1"))
    (d / "afile").write_text("x")
    (d / "syntax.toml").write_text("[model]\nname = \n")
    (d / "strtp.toml").write_text(EXAMPLE.read_text().replace("tp = 4", 'tp = "4"'))
    (d / "typo.toml").write_text(EXAMPLE.read_text().replace("[parallelism]", "[parallelism]\ntpp = 2"))
    h0 = H0.read_text()
    (d / "zrails.toml").write_text(h0.replace("rails = 8", "rails = 0"))
    (d / "zup.toml").write_text(h0.replace("uplinks = 8", "uplinks = 0"))
    (d / "big.toml").write_text(h0.replace("count = 16", "count = 2048"))
    (d / "g175.toml").write_text(
        '[model]\nname = "gpt3-175b"\nseq_len = 2048\n[parallelism]\ntp = 8\npp = 16\nglobal_batch = 1536\n'
        f'recompute = "full"\nzero_stage = 1\n[cluster]\ntopology = "{d / "big.toml"}"\n[run]\nbackend = "analytic"\n'
    )
    (d / "flows_bin.csv").write_bytes(b"src,dst,size_bytes,start_s\n\xff\xff,1,2,3\n")
    (d / "flows_quote.csv").write_text('src,dst,size_bytes,start_s\n"h0,h1,100,0\n')
    for name in [p.name for p in d.iterdir()]:
        out[name] = d / name
    return out


def _cases(f: dict[str, Path]) -> list[tuple[list[str], str]]:
    d = f["dir"]
    ex = str(EXAMPLE)
    return [
        (["plan", str(f["bin.toml"])], "is not UTF-8 text: byte 0xff at offset 0"),
        (["plan", str(f["latin1.toml"])], "byte 0xe9 at offset"),
        (["plan", str(f["syntax.toml"])], "is not valid TOML: line 2, column"),
        (["plan", str(d)], "is a directory"),
        (["topo", "show", str(f["bin.toml"])], "topology file"),
        (["plan", ex, "--out", str(f["afile"])], "is a regular file; give a directory"),
        (["plan", ex, "--out", str(f["afile"] / "sub")], "is a file, not a directory"),
        (["plan", ex, "--out", "/dev/null"], "pseudo file system"),
        (["plan", ex, "--out", "/proc/hetero"], "pseudo file system"),
        (["plan", ex, "--out", "/sys/hetero"], "pseudo file system"),
        (["run", str(DEMO), "--out", "/dev/null"], "pseudo file system"),
        (["collective", "all_reduce", "-t", "star:4", "--tuning", str(f["bin.toml"]), "-s", "1MiB"], "tuning file"),
        (["topo", "show", "h0", "--plot", "/proc/x.png"], "pseudo file system"),
        (["topo", "show", "h0", "--plot", str(d / "x.svg")], "must end in .png"),
        (["topo", "show", "h0", "--plot", str(f["afile"] / "x.png")], "is a file, not a directory"),
        (["collective", "all_reduce", "-t", "h0", "--link-rate", "10Gbps", "-s", "1MiB"], "applies to star:N"),
        (["collective", "all_reduce", "-t", "h0", "--link-delay", "2us", "-s", "1MiB"], "applies to star:N"),
        (["collective", "all_reduce", "-t", "star:4", "--ranks", "", "-s", "1MiB"], "--ranks ('') names no GPU"),
        (["collective", "all_reduce", "-t", "star:4", "--ranks", "h0,h0", "-s", "1MiB"], "is listed twice"),
        (["collective", "all_reduce", "-t", "star:1", "-s", "1MiB"], "nothing to communicate"),
        (["collective", "all_gather", "-t", "star:4", "--gpus", "1", "-s", "1MiB"], "nothing to communicate"),
        (["collective", "send_recv", "-t", "star:4", "--peer", "h0", "-s", "1MiB"], "sending GPU itself"),
        (["collective", "all_reduce", "-t", "star:100000000", "-s", "1MiB"], "more than 65536 hosts"),
        (["topo", "show", str(f["zrails.toml"])], "network.rails (0) must be an integer >= 1"),
        (["topo", "show", str(f["zup.toml"])], "network.rail.uplinks (0) must be an integer >= 1"),
        (["plan", str(f["strtp.toml"])], "parallelism.tp ('4') must be an integer; write it without quotes"),
        (["plan", str(f["typo.toml"])], "did you mean 'tp'?"),
        (["plan", ex, "--set", "parallelism.tp=four"], "must be an integer"),
        (["plan", ex, "--set", "parallelism.global_batch=400000"], "per-rank ops per iteration"),
        (["plan", ex, "--set", "parallelism.global_batch=4000000000000000"], "per-rank ops per iteration"),
        (["run", str(f["g175.toml"]), "--out", str(d / "r175")], "available on this machine"),
        (
            ["run", str(DEMO), "--backend", "analytic", "--set", "run.iterations=100000000", "--out", str(d / "rit")],
            "available on this machine",
        ),
        (["flows", str(f["bin.toml"]), "-t", "star:4", "-o", str(d / "fo")], "is not UTF-8 text"),
        (["flows", str(f["flows_bin.csv"]), "-t", "star:4", "-o", str(d / "fo")], "byte 0xff at offset 27"),
        (["flows", str(f["flows_quote.csv"]), "-t", "star:4", "-o", str(d / "fo")], "is not valid CSV: line"),
        (["flows", str(DEMO), "-t", "h0", "--link-rate", "1Gbps", "-o", str(d / "fo")], "applies to star:N"),
    ]


def test_issue_corpus(files) -> None:
    """Every case of issue 17: exit 2, one line naming the problem, fast, before any output is written."""
    cases = _cases(files)
    for argv, needle in cases:
        res = run_cli(argv)
        assert_clean(res, argv, allowed=(2,))
        assert needle in res.err, (argv, res.err)
        assert res.wall_s < 20, (argv, res.wall_s)
    assert not (files["dir"] / "r175").exists() and not (files["dir"] / "rit").exists()
    assert len(cases) == 36


def test_disconnected_topology_rejected() -> None:
    from hetero_ns3.topology.build import check_connected
    from hetero_ns3.topology.graph import HOST, SWITCH, GraphLink, GraphNode, make_graph

    nodes = [GraphNode(n, HOST) for n in ("a", "b", "c")] + [GraphNode("s0", SWITCH), GraphNode("s1", SWITCH)]
    links = [GraphLink("a", "s0", 1e9, 0.0), GraphLink("b", "s0", 1e9, 0.0), GraphLink("c", "s1", 1e9, 0.0)]
    with pytest.raises(ScenarioError, match=r"disconnected: 1 of 3 GPUs \(e.g. 'c'\)"):
        check_connected(make_graph(nodes, links), "two-islands")
    check_connected(make_graph(nodes, [*links, GraphLink("s0", "s1", 1e9, 0.0)]), "joined")


def test_good_inputs_still_pass(tmp_path) -> None:
    for argv in (
        ["plan", str(EXAMPLE), "--out", str(tmp_path / "p")],
        ["plan", str(EXAMPLE), "--out", str(tmp_path / "p")],  # reuse
        ["collective", "all_reduce", "-t", "star:4", "--link-rate", "400Gbps", "-s", "1MiB"],
        ["collective", "send_recv", "-t", "star:4", "--gpus", "1", "--peer", "h2", "-s", "1MiB"],
        ["topo", "show", "h0", "--plot", str(tmp_path / "t.PNG")],
    ):
        res = run_cli(argv)
        assert res.rc == 0, (argv, res.err)
    assert (tmp_path / "t.PNG").is_file()


def test_reused_run_dir_cleared_first(tmp_path) -> None:
    """A stale summary.json / trace.json of an earlier run never survives into a new run's directory."""
    from hetero_ns3.results import recording_run

    out = tmp_path / "run"
    (out / "plots").mkdir(parents=True)
    (out / "summary.json").write_text('{"status": "ok"}')
    (out / "trace.json").write_text("{}")
    (out / "plots" / "timeline.png").write_bytes(b"x")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(KeyboardInterrupt), recording_run(out) as rec:
        assert not (out / "summary.json").exists() and not (out / "trace.json").exists()
        assert rec is not None
        raise KeyboardInterrupt
    doc = json.loads((out / "summary.json").read_text())
    assert doc["status"] == "interrupted"
    assert not (out / "trace.json").exists() and not (out / "plots").exists()
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_writes_partial_run_dir(tmp_path, sig) -> None:
    """SIGTERM is as safe as Ctrl-C: status interrupted, reason names the signal, exit 128 + n."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "ok", "iteration_time_s": 1.0}')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "hetero_ns3.cli.main", "run", str(DEMO), "--backend", "analytic"]
    argv += ["--set", "run.iterations=5", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        for line in proc.stderr:  # wait until the run has started (after parsing and the estimate)
            if "lowering" in line:
                break
        time.sleep(0.2)
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + int(sig)
    doc = json.loads((out / "summary.json").read_text())
    assert doc["status"] == "interrupted"
    assert doc["reason"] == f"interrupted ({sig.name})"


def test_output_paths_of_plan_report_and_validate_are_checked_first(files) -> None:
    """--chakra-out, report --out and validate --out were written without the checks of --out: a mkdir or
    temporary-file traceback (validate's after every case had run), exit 1."""
    d, afile = files["dir"], str(files["afile"])
    for argv, needle in [
        (["plan", str(EXAMPLE), "--chakra-out", "/proc/hetero-et"], "--chakra-out ('/proc/hetero-et') is under /proc"),
        (["plan", str(EXAMPLE), "--chakra-out", afile], "is a regular file; give a directory"),
        (["report", str(d), "--out", "/proc/r.html"], "--out ('/proc/r.html') is under /proc"),
        (["report", str(d), "--out", f"{afile}/r.html"], "is a file, not a directory"),
        (["report", str(d), "--top", "-1"], "--top (-1) must be >= 0"),
        (["validate", "--quick", "--out", "/proc/hetero-val"], "--out ('/proc/hetero-val') is under /proc"),
        (["validate", "--quick", "--out", afile], "is a regular file; give a directory"),
    ]:
        res = run_cli(argv)
        assert_clean(res, argv, allowed=(2,))
        assert needle in res.err, (argv, res.err)
        assert res.wall_s < 5, (argv, res.wall_s)
