"""``hetero-ns3 validate --workers``: SIGTERM to the run, or Ctrl-C to its process group, mid-run ends the worker
processes at once, without their tracebacks (not even from a worker still starting), and keeps the finished cases
in the tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
SHORT = "heldout.nemo.llama2-7b.h100x8"  # under a second of simulation
LONG = "heldout.nemo.llama3-405b.b200x128.cp2"  # about 90 s alone on a 2-core machine
NEXT = "heldout.nemo.llama2-70b.h100x64"  # started when the short case ends: still starting when the signal comes


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.is_file() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to list the worker processes")
@pytest.mark.parametrize(("signame", "group", "status"), [("SIGTERM", False, 143), ("SIGINT", True, 130)])
def test_a_signal_ends_the_workers_and_keeps_finished_cases(tmp_path, signame, group, status):
    out = tmp_path / "val"
    cmd = [sys.executable, "-m", "hetero_ns3", "validate", "--case", SHORT, "--case", LONG, "--case", NEXT,
           "--workers", "2", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "validation.json").is_file():
        time.sleep(0.2)
    assert (out / "validation.json").is_file(), "the short case did not finish"
    # The third case's worker starts as the short one's ends (one case per process): signal now, while it is still
    # importing (before session 37 a worker in its first second printed the interpreter's traceback on Ctrl-C).
    time.sleep(0.3)
    workers = [p for p in _children(proc.pid) if _alive(p)]
    assert workers, "no worker process is running the long case"
    for p in workers:  # a worker ignores SIGINT (the run answers Ctrl-C for it): none dies, none prints
        os.kill(p, signal.SIGINT)
    time.sleep(1.0)
    assert all(_alive(p) for p in workers), "a worker died of SIGINT"
    signum = getattr(signal, signame)
    if group:  # what Ctrl-C in a terminal does: every process of the group, workers included, gets it
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)  # the long case alone needs about 90 s: the run must not wait for it
    assert proc.returncode == status, err
    assert f"interrupted ({signame})" in err and "Traceback" not in err
    time.sleep(1.0)
    assert not [p for p in workers if _alive(p)], "worker processes outlived the run"
    records = json.loads((out / "validation.json").read_text())
    assert [r["case"] for r in records] == [SHORT] and records[0]["simulated"] is not None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to list the worker processes")
def test_a_killed_worker_ends_the_run_naming_its_case(tmp_path):
    """A worker killed mid-case (as the kernel's OOM killer would) ends the run with one line naming that case,
    no traceback, and the finished case kept."""
    out = tmp_path / "val"
    cmd = [sys.executable, "-m", "hetero_ns3", "validate", "--case", SHORT, "--case", LONG, "--workers", "2",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "validation.json").is_file():
        time.sleep(0.2)
    workers = [p for p in _children(proc.pid) if _alive(p)]
    assert workers, "no worker process is running the long case"
    for p in workers:
        os.kill(p, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert f"a worker process died while case {LONG!r} ran" in err
    records = json.loads((out / "validation.json").read_text())
    assert [r["case"] for r in records] == [SHORT]
