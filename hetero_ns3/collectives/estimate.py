"""Closed-form (alpha-beta) replay of a collective plan: the ``analytic`` fallback of ``collective``.

A *connection* is the queue pair of a flow: (source GPU, destination GPU, channel: ``ExecutionPlan.channel``,
0 outside collectives). Every connection gets a fixed share of the resources it crosses: the payload rate
(``line rate x efficiency``) of the source NIC rail egress and destination NIC rail ingress for
network paths, of the source GPU egress and destination GPU ingress otherwise, divided by the number
of connections using that resource. Tasks are then replayed in id order (deps always point back):
a compute task runs ``duration_s`` after its deps; a flow waits for its deps and for the previous
flow of its connection to leave the wire (connections are FIFO), transmits ``size / rate`` and lands
``path delay`` later. Compared with max-min fair sharing this is exact for the symmetric patterns of
rings, trees and uniform all-to-all in steady state and pessimistic when connections that share a
resource are not active at the same time.
"""

from __future__ import annotations

import numpy as np

from hetero_ns3.collectives.env import NETWORK, CollectiveEnv
from hetero_ns3.plan.dag import FLOW, ExecutionPlan, TaskTimes


def _resources(env: CollectiveEnv, src: str, dst: str) -> tuple[tuple, tuple]:
    p = env.path(src, dst)
    if p.kind == NETWORK:
        return ("nic-out", env.node_of(src), env.nic_of(src)), ("nic-in", env.node_of(dst), env.nic_of(dst))
    return ("out", src, p.kind), ("in", dst, p.kind)


def connection_rates(plan: ExecutionPlan, env: CollectiveEnv) -> dict[tuple[int, int, int], float]:
    """Wire rate (bytes/s) of every connection (src index, dst index, channel) of ``plan``."""
    chan = np.maximum(plan.channel, 0).tolist()
    flows = np.nonzero(plan.kind == FLOW)[0]
    conns = {(int(plan.gpu[i]), int(plan.dst[i]), chan[i]) for i in flows}
    count: dict[tuple, int] = {}
    cap: dict[tuple, float] = {}
    res_of: dict[tuple[int, int, int], tuple[tuple, tuple]] = {}
    gpus = plan.gpus
    for conn in conns:
        s, d = gpus[conn[0]], gpus[conn[1]]
        res = _resources(env, s, d)
        res_of[conn] = res
        p = env.path(s, d)
        bw = p.rate_bps / 8.0 * env.tuning.links[p.kind].efficiency
        for r in res:
            count[r] = count.get(r, 0) + 1
            cap[r] = min(cap.get(r, bw), bw)
    return {c: min(cap[r] / count[r] for r in res) for c, res in res_of.items()}


def estimate_plan(plan: ExecutionPlan, env: CollectiveEnv) -> TaskTimes:
    """Start and finish time (s) of every task of ``plan`` under the model of the module docstring."""
    n = len(plan)
    rates = connection_rates(plan, env)
    chan = np.maximum(plan.channel, 0).tolist()
    start = np.zeros(n)
    finish = np.zeros(n)
    ptr = plan.dep_ptr.tolist()
    idx = plan.dep_idx.tolist()
    kind = plan.kind.tolist()
    gpu = plan.gpu.tolist()
    dst = plan.dst.tolist()
    size = plan.size_bytes.tolist()
    dur = plan.duration_s.tolist()
    gpus = plan.gpus
    free: dict[tuple[int, int, int], float] = {}
    delay: dict[tuple[int, int], float] = {}
    fin = [0.0] * n
    st = [0.0] * n
    for i in range(n):
        a, b = ptr[i], ptr[i + 1]
        s = max((fin[j] for j in idx[a:b]), default=0.0)
        st[i] = s
        if kind[i] == FLOW:
            conn = (gpu[i], dst[i], chan[i])
            tx = max(s, free.get(conn, 0.0))
            end = tx + size[i] / rates[conn]
            free[conn] = end
            pd = delay.get(conn[:2])
            if pd is None:
                pd = delay[conn[:2]] = env.path(gpus[gpu[i]], gpus[dst[i]]).delay_s
            fin[i] = end + pd
        else:
            fin[i] = s + dur[i]
    start[:] = st
    finish[:] = fin
    return TaskTimes(start, finish)
