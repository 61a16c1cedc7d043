"""``lower_workload`` emits ops and instances in the documented order, read from ``Workload.ops``.

The order (hetero_ns3/plan/lower.py) is Kahn's algorithm over ops and collective instances (all
members as one node), smallest node id first, a node's id being the smallest op id among its ops.
This reference walks the expanded :class:`~hetero_ns3.workload.artefact.Op` objects; the lowering
reads program columns instead (hetero_ns3/workload/optable.py). Task ids are positions, so the
exits of every node must come after those of every node emitted before it.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest

from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.scenario.loader import load_scenario, scenario_from_dict
from hetero_ns3.topology import build_graph

REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"
TOY = {"name": "toy", "layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 512, "seq_len": 512}

SCENARIOS = {
    "demo": lambda: load_scenario(REPO / "scenarios" / "demo.toml"),
    "tp4_pp2_sends": lambda: scenario_from_dict(
        {
            "model": TOY,
            "parallelism": {"tp": 4, "pp": 2, "global_batch": 8, "micro_batch": 1, "zero_stage": 1},
            "cluster": {"topology": str(DATA / "two-node-h100.toml")},
        }
    ),
}


def _reference_order(ops: list) -> list[list[int]]:
    """Op ids per node, in emission order."""
    node_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    by_inst: dict[int, list[int]] = {}
    for op in ops:
        if op.instance >= 0:
            by_inst.setdefault(op.instance, []).append(op.id)
    for ids in by_inst.values():
        for i in ids:
            node_of[i] = min(ids)
    indeg: dict[int, int] = {}
    succ: dict[int, list[int]] = {}
    for op in ops:
        nd = node_of.get(op.id, op.id)
        members.setdefault(nd, []).append(op.id)
        indeg.setdefault(nd, 0)
        for d in op.deps:
            dn = node_of.get(d, d)
            if dn != nd:
                indeg[nd] += 1
                succ.setdefault(dn, []).append(nd)
    heap = [nd for nd, k in indeg.items() if k == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        nd = heapq.heappop(heap)
        order.append(members[nd])
        for s in succ.get(nd, []):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, s)
    assert len(order) == len(indeg)
    return order


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_nodes_are_emitted_in_reference_order(name: str) -> None:
    sc = SCENARIOS[name]()
    cluster = load_run_cluster(sc)
    wplan, low = lower_scenario(sc, build_graph(cluster), cluster)
    ops = [op for rank_ops in wplan.workload.ops for op in rank_ops]
    assert set(low.op_exit) == {op.id for op in ops}
    order = _reference_order(ops)
    assert any(len(ids) > 1 for ids in order)  # collective instances are exercised
    last = -1
    for ids in order:
        exits = [t for i in ids for t in low.op_exit[i]]
        assert min(exits) > last, f"node of ops {ids[:3]} emitted before an earlier node"
        last = max(exits)
    assert last == len(low.plan) - 1
