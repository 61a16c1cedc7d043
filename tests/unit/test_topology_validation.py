"""Bad cluster descriptions fail with a ScenarioError naming the field, the value and a fix."""

from __future__ import annotations

import copy
import tomllib

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.paths import preset_dir
from hetero_ns3.topology import load_cluster, parse_cluster, resolve_topology

BASE = tomllib.loads((preset_dir("topologies") / "h3.toml").read_text())


def _bad(edit):
    data = copy.deepcopy(BASE)
    edit(data)
    with pytest.raises(ScenarioError) as err:
        parse_cluster(data)
    return str(err.value)


def test_base_is_valid():
    assert parse_cluster(copy.deepcopy(BASE)).node_count == 16


def test_oversized_clusters_are_refused_before_anything_is_built():
    """A fuzzed gpus_per_node of 2**31 once made the loader build 2**32 GPU entries (out of memory)."""
    msg = _bad(lambda d: d["groups"][0].update(gpus_per_node=2**31))
    assert "groups[0].gpus_per_node" in msg and "2147483648" in msg and "at most 1024" in msg
    msg = _bad(lambda d: d["groups"][0].update(count=2**31))
    assert "groups[0].count" in msg and "exceeds 65536 GPUs" in msg and "fewer nodes" in msg
    msg = _bad(lambda d: [g.update(count=65536 // 8) for g in d["groups"]])
    assert "groups" in msg and "GPUs in all exceed 65536" in msg


def test_gpu_not_in_catalog():
    msg = _bad(lambda d: d["groups"][1].update(gpu="H300-SXM"))
    assert "groups[1].gpu" in msg and "H300-SXM" in msg and "H100-SXM" in msg


def test_nic_count_not_matching_affinity():
    msg = _bad(lambda d: d["groups"][2]["nics"].update(count=3))
    assert "groups[2].nics.affinity" in msg and "count is 3" in msg


def test_affinity_must_cover_each_gpu_once():
    msg = _bad(lambda d: d["groups"][2]["nics"].update(affinity=[[0, 1, 2, 3], [3, 4, 5, 6]]))
    assert "groups[2].nics.affinity" in msg and "exactly once" in msg


def test_zero_rate():
    msg = _bad(lambda d: d["groups"][0]["nics"].update(rate="0Gbps"))
    assert "groups[0].nics.rate" in msg and "positive" in msg


def test_zero_nvlink_rate():
    msg = _bad(lambda d: d["groups"][0]["fabric"].update(nvlink_rate=0))
    assert "groups[0].fabric.nvlink_rate" in msg


def test_bad_uplink_rate():
    msg = _bad(lambda d: d["network"]["rail"].update(uplink_rate="fast"))
    assert "network.rail.uplink_rate" in msg


def test_unknown_field_lists_valid_ones():
    msg = _bad(lambda d: d["groups"][0].update(gpus=8))
    assert "groups[0].gpus" in msg and "gpus_per_node" in msg


def test_unknown_fabric_kind():
    msg = _bad(lambda d: d["groups"][0]["fabric"].update(kind="infinityfabric"))
    assert "groups[0].fabric.kind" in msg and "nvswitch" in msg


def test_nvlink_on_pcie_fabric():
    msg = _bad(lambda d: d["groups"][2]["fabric"].update(nvlink_rate="100GBps"))
    assert "groups[2].fabric.nvlink_rate" in msg


def test_pcie_switch_must_hold_affinity_nic():
    def edit(d):
        d["groups"][2]["fabric"]["pcie_switches"] = [
            {"gpus": [0, 1, 2, 3], "nics": [1]},
            {"gpus": [4, 5, 6, 7], "nics": [0]},
        ]

    msg = _bad(edit)
    assert "groups[2].fabric.pcie_switches" in msg and "affinity NIC" in msg


def test_nics_must_divide_rails():
    def edit(d):
        d["groups"][2]["nics"].update(count=3, affinity=[[0, 1, 2], [3, 4, 5], [6, 7]])
        del d["groups"][2]["fabric"]["pcie_switches"]

    msg = _bad(edit)
    assert "groups[2].nics.count" in msg and "rails" in msg


def test_fattree_k_odd():
    def edit(d):
        d["network"] = {"kind": "fattree", "k": 7}

    assert "network.k" in _bad(edit)


def test_missing_network():
    assert "network" in _bad(lambda d: d.pop("network"))


def test_duplicate_group_name():
    assert "groups[1].name" in _bad(lambda d: d["groups"][1].update(name="h100"))


def test_unknown_preset_lists_available():
    with pytest.raises(ScenarioError, match="h0"):
        load_cluster("no-such-cluster")


def test_bad_toml_file(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("groups = [\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        resolve_topology(p)


def test_error_prefixes_file_name(tmp_path):
    data = (preset_dir("topologies") / "h0.toml").read_text().replace('"H100-SXM"', '"H999"')
    p = tmp_path / "mine.toml"
    p.write_text(data)
    with pytest.raises(ScenarioError, match=r"mine\.toml: groups\[0\]\.gpu \('H999'\)"):
        load_cluster(p)
