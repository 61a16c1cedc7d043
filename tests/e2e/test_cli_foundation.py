"""The CLI's foundation commands, run as a user would (subprocesses)."""

import os
import subprocess
import sys


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hetero_ns3", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_doctor_reports_versions():
    out = _cli("doctor", "--no-load")
    assert out.returncode == 0, out.stderr
    for key in ("python", "ns3 wheel", "cppyy", "compiler", "ns-3 include", "cache", "status"):
        assert key in out.stdout


def test_build_failure_is_one_line_exit_2_without_traceback():
    env = dict(os.environ, CXX="no-such-compiler-xyz")
    out = _cli("build", env=env)
    assert out.returncode == 2
    assert "NativeBuildError" in out.stderr and "no-such-compiler-xyz" in out.stderr
    assert "Traceback" not in out.stderr
    debug = _cli("--debug", "build", env=env)
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_unknown_command_exits_2():
    out = _cli("no-such-command")
    assert out.returncode == 2
