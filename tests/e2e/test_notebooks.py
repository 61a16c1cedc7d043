"""The notebooks in notebooks/ execute headless (nbclient) on a small study; any cell error fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
NOTEBOOKS = Path(__file__).resolve().parent.parent.parent / "notebooks"


@pytest.mark.parametrize("name", ["study_overview.ipynb", "run_flows.ipynb"])
def test_notebook_executes_on_a_small_study(name, small_study, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("HETERO_NS3_STUDY", str(small_study))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(NOTEBOOKS.parent), os.environ.get("PYTHONPATH")]))
    )
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2  # the figures rendered inline
    text = "".join(o.get("text", "") for o in outputs)
    assert "small" in text if name == "study_overview.ipynb" else "status ok" in text
    if name == "run_flows.ipynb":  # the FCT table's count is the flows per category (it was multiplied by 1e6)
        from hetero_ns3.results import load_run, load_study

        st = load_study(small_study)
        flows = load_run(Path(st.attrs["root"]) / st[st["status"] == "ok"].iloc[0]["run_dir"]).flows
        table = next(o["data"]["text/plain"] for o in outputs if "count" in o.get("data", {}).get("text/plain", ""))
        rows = {ln.split()[0]: float(ln.split()[1]) for ln in table.splitlines()[2:] if ln.strip()}
        assert rows == flows.groupby("category").size().astype(float).to_dict(), table
