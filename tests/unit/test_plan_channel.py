"""The per-task ``channel`` column of the ExecutionPlan (issue 13): set by the lowering, read by consumers.

The collective planner gives every task it adds the channel it belongs to; tasks outside collectives
get -1. Connections (ECMP identity), the flows table and the trace read the column, not the labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, plan_collective
from hetero_ns3.collectives.testbeds import rail_cluster
from hetero_ns3.pipeline import load_run_cluster, lower_scenario
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMPUTE, FLOW
from hetero_ns3.results.meta import GpuMeta
from hetero_ns3.results.tables import flows_frame
from hetero_ns3.scenario.loader import scenario_from_dict
from hetero_ns3.topology import build_graph

DATA = Path(__file__).resolve().parent.parent / "data"
TOY = {"name": "toy", "layers": 4, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 512, "seq_len": 1024}


def _label_word(text: str) -> int:
    """The ``ch<c>`` word of a label, -1 without one (what consumers used to parse)."""
    return next((int(w[2:]) for w in text.split() if w[:2] == "ch" and w[2:].isdigit()), -1)


def test_lowering_sets_the_channel_of_every_collective_task():
    sc = scenario_from_dict(
        {
            "model": TOY,
            "parallelism": {"tp": 4, "pp": 2, "global_batch": 4, "micro_batch": 1, "zero_stage": 0},
            "cluster": {"topology": str(DATA / "two-node-h100.toml")},
            "collectives": {"dp": {"algo": "ring", "protocol": "Simple", "channels": 3}},
        }
    )
    cluster = load_run_cluster(sc)
    plan = lower_scenario(sc, build_graph(cluster), cluster)[1].plan
    cats = np.asarray(plan.categories)[plan.category]
    # Model kernels belong to no collective; every collective task (tp, pp, dp) has a channel.
    assert (plan.channel[cats == "compute"] == -1).all()
    coll = np.isin(cats, ["tp", "pp", "dp"])
    assert coll.any() and (plan.channel[coll] >= 0).all()
    # The emitter writes the channel into the label for people; the column agrees with it everywhere.
    words = np.asarray([_label_word(t) for t in plan.labels])[plan.label]
    np.testing.assert_array_equal(plan.channel, words)
    # The DP ring was asked for 3 channels: its flows use exactly 0, 1, 2.
    dp_flows = (cats == "dp") & (plan.kind == FLOW)
    assert sorted(set(plan.channel[dp_flows].tolist())) == [0, 1, 2]


def test_flows_table_and_connections_read_the_column():
    env = CollectiveEnv.from_graph(rail_cluster(2, 2))
    b = PlanBuilder(env.gpus)
    res = plan_collective(b, CollectiveCall("all_reduce", env.gpus, 8 << 20, algo="ring", channels=2), env, {}, "dp")
    # A flow outside any collective, with a label that looks like a channel: it is channel -1 (0 in tables).
    odd = b.add_flow(env.gpus[0], env.gpus[1], 1000, [], label="user ch5 thing", category="dp")
    plan = b.build()
    assert res.channels == 2 and plan.channel[odd] == -1
    ids = np.flatnonzero(plan.kind == FLOW)
    meta = [GpuMeta("H100", g.split(".")[0]) for g in plan.gpus]
    df = flows_frame(plan, None, meta)
    np.testing.assert_array_equal(df["channel"].to_numpy(), np.maximum(plan.channel[ids], 0))
    assert set(df["channel"]) == {0, 1}
    # The odd flow shares the connection of the collective's channel-0 flows on the same pair.
    conn = plan.flow_connections()
    same_pair = ids[(plan.gpu[ids] == plan.gpu[odd]) & (plan.dst[ids] == plan.dst[odd]) & (ids != odd)]
    ch0 = same_pair[plan.channel[same_pair] == 0]
    assert ch0.size and (conn[ch0] == conn[odd]).all()
    assert (plan.channel[plan.kind == COMPUTE] >= -1).all()
