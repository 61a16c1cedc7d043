"""The lowering's compact per-op state: typed columns (:func:`compact`) and the op -> exit tasks mapping
(:class:`OpExits`), which replaced Python lists and a dict of tuples (docs/validation.md, "Where the
memory went"). The plans themselves are checked elsewhere (test_lower_order, test_lower_templates)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.plan.lower import OpExits, compact
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph
from tests.unit.test_lower_order import DATA, TOY


def test_compact_keeps_values_and_picks_the_smallest_type() -> None:
    small = np.array([0, -5, 2**31 - 1, -(2**31)], dtype=np.int64)
    big = np.array([0, 2**31, -1], dtype=np.int64)
    a, b = compact(small), compact(big)
    assert a.typecode == "i" and a.tolist() == small.tolist()
    assert b.typecode == "q" and b.tolist() == big.tolist()
    assert compact(np.zeros(0, dtype=np.int64)).tolist() == []


def test_op_exits_is_the_mapping_it_replaces() -> None:
    ids = np.array([30, 10, 20, 40], dtype=np.int64)  # positions 0..3, ids out of order
    multi: list[tuple[int, ...]] = [(), (7, 8)]
    ex = OpExits(ids, array("q", [5, -2, -1, 9]), multi)
    want = {30: (5,), 10: (7, 8), 20: (), 40: (9,)}
    assert dict(ex) == want and ex == want and len(ex) == 4
    assert list(ex) == [30, 10, 20, 40]  # position order
    assert ex[10] == (7, 8) and ex[40] == (9,)
    for missing in (0, 15, 41):
        with pytest.raises(KeyError):
            ex[missing]


def test_lowered_exits_are_the_last_tasks_of_each_op() -> None:
    """Every op's exit tasks exist, and an op with dependencies exits after all of its dependencies' exits."""
    sc = scenario_from_dict(
        {
            "model": TOY,
            "parallelism": {"tp": 4, "pp": 2, "global_batch": 8, "micro_batch": 1, "zero_stage": 1},
            "cluster": {"topology": str(DATA / "two-node-h100.toml")},
        }
    )
    cluster = load_run_cluster(sc)
    wplan, low = lower_scenario(sc, build_graph(cluster), cluster)
    n = len(low.plan)
    for rank_ops in wplan.workload.ops:
        for op in rank_ops:
            exits = low.op_exit[op.id]
            assert exits and all(0 <= t < n for t in exits)
            for d in op.deps:
                assert min(exits) > max(low.op_exit[d]), f"op {op.id} exits before its dependency {d}"


def test_compiled_ops_share_equal_names_and_groups() -> None:
    """Equal op names and group tuples are one object across replicas and microbatches (the compiler's
    ``_Ids.share``), so a program op holds ~280 instead of ~425 bytes on the 1T row (docs/workload.md)."""
    import sys

    sc = scenario_from_dict(
        {
            "model": TOY,
            "parallelism": {"tp": 2, "pp": 2, "dp": 4, "global_batch": 16, "micro_batch": 1},
            "cluster": {"topology": str(DATA / "two-node-h100.toml")},
        }
    )
    from hetero_ns3.workload.planner import plan_scenario

    wl = plan_scenario(sc).workload
    ops = [op for p in wl.programs for op in p.ops]
    names: dict[str, int] = {}
    groups: dict[tuple, int] = {}
    for op in ops:
        assert names.setdefault(op.name, id(op.name)) == id(op.name), op.name
        if op.groups:
            assert groups.setdefault(op.groups, id(op.groups)) == id(op.groups), op.groups
    assert len(names) < len(ops) / 2 and len(groups) < len(ops) / 10  # there is something to share
    per_op = sum(sys.getsizeof(op.name) for op in {id(op.name): op for op in ops}.values()) / len(ops)
    assert per_op < 40.0  # bytes of name strings per op; one string per op would be ~60-80
