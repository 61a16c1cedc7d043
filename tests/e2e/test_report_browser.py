"""``hetero-ns3 report`` pages loaded in a real headless browser (Chromium): headings, tables, no broken image."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# After the load event, count the images that decoded (naturalWidth > 0) and write "ok/total" into the DOM.
IMG_CHECK = (
    "<script>window.addEventListener('load',()=>{const im=[...document.images];"
    "document.body.insertAdjacentHTML('beforeend','<div id=\"imgcheck\">'+"
    "im.filter(i=>i.complete&&i.naturalWidth>0).length+'/'+im.length+'</div>')})</script>"
)


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "no headless browser: install Chromium (Debian: apt-get install chromium; .ci/run does this where apt-get works)"
    )


def dump_dom(html: Path, tmp_path: Path) -> str:
    """The page's DOM after load, from headless Chromium (flags that work on a closed network, fresh profile)."""
    checked = tmp_path / f"checked-{html.name}"
    checked.write_text(html.read_text(encoding="utf-8").replace("</body>", IMG_CHECK + "</body>"), encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    cmd = [
        _browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", checked.resolve().as_uri(),
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def _images(dom: str) -> tuple[int, int]:
    m = re.search(r'<div id="imgcheck">(\d+)/(\d+)</div>', dom)
    assert m, "the image check did not run (no load event?)"
    return int(m.group(1)), int(m.group(2))


def _report(target: Path, out: Path) -> Path:
    res = subprocess.run(
        [sys.executable, "-m", "hetero_ns3", "report", str(target), "--out", str(out)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return out


def test_study_report_renders_in_chromium(small_study, tmp_path):
    dom = dump_dom(_report(small_study, tmp_path / "study.html"), tmp_path)
    for heading in ("Study small", "Summary", "Study table", "Against parallelism.tp", "Against model.seq_len"):
        assert f">{heading}</h" in dom, heading
    assert dom.count("<tr>") >= 4 + 1 + 5  # 4 points + header, summary rows
    ok, total = _images(dom)
    assert total == 2 and ok == total


def test_run_report_renders_in_chromium(small_study, tmp_path):
    run = min(p for p in (small_study / "runs").iterdir() if p.is_dir())
    dom = dump_dom(_report(run, tmp_path / "run.html"), tmp_path)
    for heading in ("Breakdown per GPU type", "Timeline", "Slowest flows", "Busiest GPU ports over time", "Trace"):
        assert f">{heading}</h" in dom, heading
    assert "H100-SXM" in dom and "ui.perfetto.dev" in dom
    # the page is written outside the run directory: its link reaches the run's trace from there
    href = re.search(r'<a href="([^"]+)">trace\.json</a>', dom)
    assert href and (tmp_path / href.group(1)).resolve() == (run / "trace.json").resolve(), href
    ok, total = _images(dom)
    assert total == 3 and ok == total  # breakdown, timeline, ports


def test_the_check_sees_a_broken_image(small_study, tmp_path):
    page = _report(small_study, tmp_path / "study.html")
    text = page.read_text(encoding="utf-8").replace("data:image/png;base64,iVBOR", "data:image/png;base64,XXXXX", 1)
    broken = tmp_path / "broken.html"
    broken.write_text(text, encoding="utf-8")
    ok, total = _images(dump_dom(broken, tmp_path))
    assert total == 2 and ok == 1


def test_validation_page_renders_in_chromium(tmp_path):
    """``hetero-ns3 validate --out`` on three real cases (two collectives, one H200 layer), its page in Chromium:
    headings, the scorecard's groups, both figures decoded, the case rows with their source links."""
    cases = ["nccl.h100x8.all_reduce.1GiB", "nic.hdr200.all_reduce.2ranks", "h200.layer.llama2-7b-tp1"]
    out = tmp_path / "val"
    cmd = [sys.executable, "-m", "hetero_ns3", "validate", "--out", str(out)]
    for c in cases:
        cmd += ["--case", c]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    dom = dump_dom(out / "validation.html", tmp_path)
    for heading in ("Summary", "Scorecard", "Error per case", "Cumulative |error| per set", "Cases"):
        assert f">{heading}</h" in dom, heading
    assert ">calibration / collective<" in dom and ">calibration / kernel<" in dom
    for c in cases:
        assert f"<td>{c}</td>" in dom, c
    assert dom.count('<a href="https://') == 2  # the layer case's source is a file of the project, not a URL
    assert "hetero_ns3/data/measured/h200/layer_sustained.csv" in dom
    ok, total = _images(dom)
    assert total == 2 and ok == total
