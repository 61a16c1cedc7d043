"""Collectives of different parallel dimensions run on their own communicator's streams (demo cause, issue 14)."""

from __future__ import annotations

import numpy as np

from hetero_ns3.collectives import CollectiveCall, CollectiveEnv, estimate_plan, plan_collective
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import COMPUTE
from hetero_ns3.topology import star


def test_tp_call_does_not_queue_behind_a_waiting_dp_call() -> None:
    """A DP all-reduce whose peer joins late (after 50 ms of compute) must not delay a TP all-reduce
    issued after it on the early GPUs: NCCL runs each communicator's kernels on its own stream."""
    env = CollectiveEnv.from_graph(star(4, 100e9, 1e-6))
    g = env.gpus
    b = PlanBuilder(g)
    late = b.add_compute(g[1], 0.050, (), stream=0, label="slow replica backward", category="compute")
    plan_collective(b, CollectiveCall("all_reduce", (g[0], g[1]), 64 << 20), env, {g[1]: [late]}, category="dp")
    tp = plan_collective(b, CollectiveCall("all_reduce", (g[0], g[2]), 1 << 20), env, category="tp")
    plan = b.build()
    times = estimate_plan(plan, env)
    tp_end = max(times.finish_s[t] for ts in tp.exits.values() for t in ts)
    assert tp_end < 0.005  # about 1 MiB at 100 Gb/s, not after the 50 ms wait
    on_g0 = (plan.kind == COMPUTE) & (plan.gpu == 0)
    assert len(np.unique(plan.stream[on_g0])) >= 2  # the two calls' kernels on different streams
