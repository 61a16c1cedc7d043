"""``op_table`` / ``op_graph`` (hetero_ns3/workload/optable.py) against ``Workload.ops``.

The columns must describe exactly the ops :func:`expand_op` makes, in ``Workload.ops`` order, and the
graph must merge collective instances and count edges as a pass over those ops does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero_ns3.errors import PlanningError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.artefact import Program, ProgramOp, Workload, expand_op
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.optable import op_graph, op_table
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.placement import RankSlot
from hetero_ns3.workload.planner import build_plan

DENSE = replace(get_model("gpt3-350m"), layers=4)
MOE = replace(get_model("mixtral-8x7b"), layers=2, seq_len=256)

CASES = {
    "tp2_pp2_zero1": (DENSE, {"tp": 2, "pp": 2, "global_batch": 8, "micro_batch": 1, "zero_stage": 1}),
    "tp1_pp2_vpp2_interleaved": (
        DENSE,
        {"tp": 1, "pp": 2, "global_batch": 32, "micro_batch": 1, "vpp": 2, "schedule": "interleaved"},
    ),
    "tp4_sp_allreduce": (
        DENSE,
        {"tp": 4, "pp": 1, "global_batch": 8, "micro_batch": 1, "sequence_parallel": True, "zero_stage": 0},
    ),
    "moe_ep": (MOE, {"tp": 2, "pp": 1, "ep": 4, "global_batch": 8, "micro_batch": 1, "sequence_parallel": True}),
    "cp_ring": (DENSE, {"tp": 2, "pp": 2, "cp": 2, "global_batch": 8, "micro_batch": 1, "order": "tp-dp-pp"}),
}


def _workload(name: str) -> Workload:
    model, plan = CASES[name]
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 2, 8),)))
    try:
        return build_plan(model, ParallelismSpec(**plan), gpus).workload
    except TypeError as exc:  # a field name of ParallelismSpec changed: say which case
        raise AssertionError(f"case {name}: {exc}") from exc


@pytest.mark.parametrize("name", sorted(CASES))
def test_table_rows_are_the_expanded_ops(name: str) -> None:
    wl = _workload(name)
    ops = [op for rank_ops in wl.ops for op in rank_ops]
    table = op_table(wl)
    assert len(table) == len(ops) > 0
    for i, op in enumerate(ops):
        assert expand_op(table.prog_op[i], int(table.rank[i]), int(table.member[i]), wl.tp) == op
    assert table.ids.tolist() == [op.id for op in ops]
    assert table.instance.tolist() == [op.instance for op in ops]
    deps = [tuple(table.ids[table.dep_pos[table.dep_ptr[i] : table.dep_ptr[i + 1]]].tolist()) for i in range(len(ops))]
    assert deps == [op.deps for op in ops]


def _reference_graph(ops: list) -> tuple[dict[int, list[int]], dict[int, int], dict[int, list[int]]]:
    """Members, in-degree and successors by node id (smallest op id of the node), from the ops."""
    node_of: dict[int, int] = {}
    by_inst: dict[int, list[int]] = {}
    for op in ops:
        if op.instance >= 0:
            by_inst.setdefault(op.instance, []).append(op.id)
    for ids in by_inst.values():
        for i in ids:
            node_of[i] = min(ids)
    members: dict[int, list[int]] = {}
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
    return members, indeg, succ


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_matches_a_pass_over_the_ops(name: str) -> None:
    wl = _workload(name)
    ops = [op for rank_ops in wl.ops for op in rank_ops]
    table = op_table(wl)
    g = op_graph(table)
    members, indeg, succ = _reference_graph(ops)
    node_ids = sorted(members)
    assert g.n_nodes == len(node_ids)
    ids = table.ids
    got_members = {node_ids[j]: ids[g.mem_pos[g.mem_ptr[j] : g.mem_ptr[j + 1]]].tolist() for j in range(g.n_nodes)}
    assert got_members == members
    assert g.indeg.tolist() == [indeg[n] for n in node_ids]
    got_succ = {
        node_ids[j]: sorted(node_ids[s] for s in g.succ[g.succ_ptr[j] : g.succ_ptr[j + 1]]) for j in range(g.n_nodes)
    }
    assert got_succ == {n: sorted(succ.get(n, [])) for n in node_ids}
    instance = {op.id: op.instance for op in ops}
    assert g.is_instance.tolist() == [instance[n] >= 0 for n in node_ids]
    assert np.array_equal(g.node[g.mem_pos], np.repeat(np.arange(g.n_nodes), np.diff(g.mem_ptr)))


def _tiny(ops: tuple[ProgramOp, ...]) -> Workload:
    slot = RankSlot(0, 0, 0, 0, "n0.g0", "H100-SXM", 0, "g")
    return Workload((slot,), (Program(0, 0, (0,), "H100-SXM", ops),), 1, {})


def test_unknown_dependency_names_the_op() -> None:
    wl = _tiny((ProgramOp(0, "compute", "a", "compute", ()), ProgramOp(1, "compute", "b", "compute", (7,))))
    with pytest.raises(PlanningError, match=r"op 1 \(b\) depends on unknown op 7"):
        op_table(wl)


def test_duplicate_ids_are_refused() -> None:
    wl = _tiny((ProgramOp(0, "compute", "a", "compute", ()), ProgramOp(0, "compute", "b", "compute", ())))
    with pytest.raises(PlanningError, match="duplicate op ids"):
        op_table(wl)


def test_columns_are_int32_below_two_to_the_31() -> None:
    """The table costs 4 bytes per integer: ids, rank, member, instance and dep_ptr per row, dep_pos per dependency."""
    wl = _workload("tp2_pp2_zero1")
    table = op_table(wl)
    n, e = len(table), len(table.dep_pos)
    assert {a.dtype for a in (table.ids, table.rank, table.member, table.instance, table.dep_ptr, table.dep_pos)} == {
        np.dtype(np.int32)
    }
    assert table.nbytes == 4 * (5 * n + 1 + e)
    g = op_graph(table)
    assert g.node.dtype == g.mem_pos.dtype == g.succ.dtype == np.int32


@pytest.mark.parametrize("big", [2**31, -(2**31) - 2])
def test_ids_past_int32_widen_the_columns(big: int) -> None:
    wl = _tiny((ProgramOp(big, "compute", "a", "compute", ()), ProgramOp(big + 1, "compute", "b", "compute", (big,))))
    table = op_table(wl)
    assert table.ids.dtype == np.int64
    assert table.ids.tolist() == [big, big + 1]
    assert table.dep_pos.tolist() == [0]


def test_a_rank_in_two_programs_takes_the_last_one() -> None:
    """Outside the usual layout (each rank runs one program) every rank-level id is searched: same rows."""
    slots = tuple(RankSlot(r, 0, 0, 0, f"n0.g{r}", "H100-SXM", 0, "g") for r in range(2))
    a = (ProgramOp(0, "compute", "a0", "compute", ()), ProgramOp(1, "compute", "a1", "compute", (0,)))
    b = (ProgramOp(2, "compute", "b0", "compute", ()), ProgramOp(3, "compute", "b1", "compute", (2, 0)))
    wl = Workload(slots, (Program(0, 0, (0, 1), "H100-SXM", a), Program(1, 0, (1,), "H100-SXM", b)), 2, {})
    ops = [op for rank_ops in wl.ops for op in rank_ops]
    table = op_table(wl)
    assert table.ids.tolist() == [op.id for op in ops] == [0, 2, 4, 6]
    deps = [tuple(table.ids[table.dep_pos[table.dep_ptr[i] : table.dep_ptr[i + 1]]].tolist()) for i in range(len(ops))]
    assert deps == [op.deps for op in ops]


def test_a_dependency_across_programs_resolves_to_the_same_member() -> None:
    """Program-level dep ``d`` of member ``t`` is rank-level ``d x tp + t``, found in the program owning ``d``."""
    slots = tuple(RankSlot(r, 0, 0, 0, f"n0.g{r}", "H100-SXM", 0, "g") for r in range(4))
    a = (ProgramOp(0, "compute", "a0", "compute", ()),)
    b = (ProgramOp(1, "compute", "b0", "compute", (0,)),)
    wl = Workload(slots, (Program(1, 0, (2, 3), "H100-SXM", b), Program(0, 0, (0, 1), "H100-SXM", a)), 2, {})
    ops = [op for rank_ops in wl.ops for op in rank_ops]
    table = op_table(wl)
    deps = [tuple(table.ids[table.dep_pos[table.dep_ptr[i] : table.dep_ptr[i + 1]]].tolist()) for i in range(len(ops))]
    assert deps == [op.deps for op in ops] == [(), (), (0,), (1,)]


def test_unknown_member_of_a_known_op_is_refused() -> None:
    """Op 0 has one member, so member 1's dependency on it (rank-level id 1) names no op."""
    slots = tuple(RankSlot(r, 0, 0, 0, f"n0.g{r}", "H100-SXM", 0, "g") for r in range(3))
    a = (ProgramOp(0, "compute", "a0", "compute", ()),)
    b = (ProgramOp(1, "compute", "b0", "compute", (0,)),)
    wl = Workload(slots, (Program(0, 0, (0,), "H100-SXM", a), Program(1, 0, (1, 2), "H100-SXM", b)), 2, {})
    with pytest.raises(PlanningError, match=r"op 3 \(b0\) depends on unknown op 1"):
        op_table(wl)
