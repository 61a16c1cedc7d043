"""[cluster] resolution through hetero_ns3.topology presets (H0..H4) and inline groups."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path

import pytest

from hetero_ns3.scenario import scenario_from_dict
from hetero_ns3.scenario.cluster import resolve_cluster_gpus
from hetero_ns3.workload.planner import resolve

REPO_TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _has_load_cluster() -> bool:
    try:
        topo = importlib.import_module("hetero_ns3.topology")
    except ImportError:
        return False
    if hasattr(topo, "load_cluster"):
        return True
    try:
        return hasattr(importlib.import_module("hetero_ns3.topology.loader"), "load_cluster")
    except ImportError:
        return False


needs_topology = pytest.mark.skipif(
    not _has_load_cluster(), reason="hetero_ns3.topology.load_cluster not available yet"
)

LEVELS = {
    "h0": {"H100-SXM": 128},
    "h1": {"H100-SXM": 96, "A100-SXM-80GB": 32},
    "h2": {"H100-SXM": 64, "A100-SXM-80GB": 64},
    "h3": {"H100-SXM": 64, "A100-SXM-80GB": 32, "L40S": 32},
    "h4": {"H100-SXM": 32, "A100-SXM-80GB": 32, "L40S": 32, "A100-PCIe-80GB": 32},
}


@needs_topology
@pytest.mark.parametrize("level", sorted(LEVELS))
def test_levels_resolve_to_the_agreed_gpu_mix(level: str) -> None:
    sc = scenario_from_dict({"cluster": {"topology": level}})
    gpus = resolve_cluster_gpus(sc.cluster)
    assert dict(Counter(g.gpu_type for g in gpus)) == LEVELS[level]
    assert len({g.name for g in gpus}) == 128


@needs_topology
def test_plan_on_h4_partitions_by_replica_speed() -> None:
    raw = {
        "model": {"name": "llama-65b"},
        "parallelism": {"tp": 8, "pp": 4, "global_batch": 64, "sequence_parallel": True, "recompute": "selective"},
        "cluster": {"topology": "h4"},
    }
    sc = scenario_from_dict(raw)
    r = resolve(sc.model, sc.parallelism, resolve_cluster_gpus(sc.cluster))
    reps = r.spec.replica_microbatches
    types = [r.placement.slot(0, 0, d).gpu_type for d in range(4)]
    assert sum(reps) == 64 and types[0] == "H100-SXM" and reps[0] == max(reps)
    assert all(m.fits for m in r.memory)


def test_inline_groups_name_gpus_like_topology() -> None:
    sc = scenario_from_dict({"cluster": {"groups": [{"gpu_type": "L40S", "nodes": 2, "gpus_per_node": 4}]}})
    gpus = resolve_cluster_gpus(sc.cluster)
    assert [g.name for g in gpus[:5]] == ["n0.g0", "n0.g1", "n0.g2", "n0.g3", "n1.g0"]
    assert gpus[4].node == 1 and gpus[4].local_index == 0 and gpus[0].group == "g0"


def test_inline_unknown_gpu_type() -> None:
    from hetero_ns3.errors import ScenarioError

    sc = scenario_from_dict({"cluster": {"groups": [{"gpu_type": "H1000", "nodes": 1}]}})
    with pytest.raises(ScenarioError, match=r"cluster\.groups\[0\]\.gpu_type \('H1000'\) is not a known GPU type"):
        resolve_cluster_gpus(sc.cluster)


def test_a_missing_topology_names_the_field_the_places_looked_in_and_the_presets(tmp_path, monkeypatch) -> None:
    """It said "topologies preset 'x' not found (no such file, ...)", naming neither the scenario field nor
    the scenario's directory that a relative path is read from."""
    from hetero_ns3.errors import ScenarioError
    from hetero_ns3.pipeline import load_run_cluster
    from hetero_ns3.scenario.loader import load_scenario

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[cluster]\ntopology = "topos/x.toml"\n')
    sc = load_scenario(tmp_path / "s.toml")
    with pytest.raises(ScenarioError) as err:
        load_run_cluster(sc)
    msg = str(err.value)
    assert msg.startswith("cluster.topology ('topos/x.toml') is neither a topology file (relative to the scenario's")
    assert str(tmp_path) in msg and "'h0', 'h1'" in msg and "\n" not in msg
    with pytest.raises(ScenarioError, match=r"^cluster.topology \('topos/x.toml'\) is neither"):
        resolve_cluster_gpus(sc.cluster, sc.base_dir)
    (tmp_path / "topos").mkdir()
    (tmp_path / "topos" / "x.toml").write_text((REPO_TOPOLOGIES / "h100-2node.toml").read_text())
    assert len(load_run_cluster(sc).gpus()) == 16
