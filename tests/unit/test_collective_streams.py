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


def test_calls_of_one_communicator_run_one_after_the_other() -> None:
    """Two all-reduces of one communicator on a GPU: the second's kernel starts when the first's has
    finished on every channel (one CUDA stream per communicator), not channel by channel. Before, channel 0
    of a data-parallel bucket started when channel 0 of the previous bucket was done, so buckets ran
    concurrently and contended for the NICs: the demo took 70.4 ms, and 67.7 ms with the A100s 1.5x slower."""
    env = CollectiveEnv.from_graph(star(4, 100e9, 1e-6))
    g = env.gpus
    b = PlanBuilder(g)
    first = plan_collective(b, CollectiveCall("all_reduce", g, 64 << 20, channels=4), env, category="dp")
    n0 = len(b)
    plan_collective(b, CollectiveCall("all_reduce", g, 64 << 20, channels=4), env, category="dp")
    plan = b.build()
    times = estimate_plan(plan, env)
    second = np.arange(n0, len(plan))
    for gpu, ex in first.exits.items():
        gi = plan.gpus.index(gpu)
        end_first = max(times.finish_s[t] for t in ex)
        mine = second[(plan.gpu[second] == gi) & (plan.kind[second] == COMPUTE)]
        assert times.start_s[mine].min() >= end_first - 1e-15, gpu


def test_slower_a100s_do_not_shorten_the_demo() -> None:
    """The demo (analytic) with its A100s 1.5x slower must not finish sooner than with them at speed: with
    data-parallel buckets overlapping channel by channel it did (70.370 -> 67.671 ms)."""
    from pathlib import Path

    from hetero_ns3.validation import simulate_scenario

    base = simulate_scenario(Path("scenarios/demo.toml"))["step_time_s"]
    slow = simulate_scenario(Path("scenarios/demo.toml"), ['faults.gpus=[{gpu_type="A100-SXM-80GB", factor=1.5}]'])[
        "step_time_s"
    ]
    assert slow >= base


def test_a_late_rank_neither_forwards_nor_reduces_before_it_joins() -> None:
    """Rank 1 joins a 2-channel ring all-reduce 50 ms late. Everything it sends and reduces must wait for
    its entry: on channel 1 its step-1 send depended only on the data received at step 0 (its reduction is
    the first task on that channel's stream, and no earlier flow of its connection held it back)."""
    env = CollectiveEnv.from_graph(star(4, 100e9, 1e-6))
    g = env.gpus
    b = PlanBuilder(g)
    late = b.add_compute(g[1], 0.050, (), stream=0, label="slow backward", category="compute")
    plan_collective(b, CollectiveCall("all_reduce", g, 8 << 20, algo="ring", channels=2), env, {g[1]: [late]})
    plan = b.build()
    times = estimate_plan(plan, env)
    joined = times.finish_s[late]
    mine = np.nonzero((plan.gpu == 1) & (np.arange(len(plan)) != late))[0]
    assert times.start_s[mine].min() >= joined - 1e-12
