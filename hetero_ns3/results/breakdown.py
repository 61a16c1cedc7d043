"""Where each GPU's iteration time goes: critical-path blame of every idle gap.

For every GPU ``g`` the window ``[t0, t1]`` (first start to last finish of the whole plan, the
iteration time ``T``; for a run of several iterations, the steady-state iterations: see
:func:`attribute`) is split exactly into six terms:

* ``compute_s``: time during which at least one compute-class kernel runs on ``g`` (normally its
  compute stream 0; see :mod:`hetero_ns3.results.categories`);
* the rest, the *gaps*, is explained by walking a blame chain backwards in time. A gap ``[a, b]``
  that ends when a compute kernel ``k`` of ``g`` starts is blamed on ``k``'s last-finishing
  dependency, then on that task's last-finishing dependency, and so on, until the chain reaches
  time ``a``. Each chain element ``e`` explains the part of ``[a, b]`` it spans:

  - a flow: exposed communication, intra-node if both endpoints share a node, else inter-node; a fused
    collective call's task (label ending ``plan.dag.FUSED_LABEL_SUFFIX``, a one-node call standing for
    its flows) counts as an intra-node flow;
  - a communication kernel (compute task of a communication category: a reduction, a collective's
    launch or protocol latency): exposed communication of the class of the flow that feeds it (the
    next flow further back in the chain; if none, the nearest flow closer to ``g``; intra-node if
    the chain has no flow);
  - a compute kernel of another GPU ``h``: waiting for a peer. Its context is the nearest
    communication element between ``e`` and ``g`` in the chain (if none, the nearest one further
    back, followed without adding time). Through a pipeline (``pp``) flow it is a pipeline wait: all
    of ``g``'s are pooled (``W``) and split at the end, ``min(W, X)`` straggler wait and the rest
    bubble, ``X`` the largest speed-caused load excess ``C_h - max(C_g, C_h s_g / s_h)`` among the
    stages ``g`` waited on (``C`` compute per iteration, ``s`` = ``GpuMeta.slowdown``). Otherwise
    (collective or no context) the piece is compared with ``E = D(h, u) - D(g, a)`` (``D``: compute
    done since the start of the run, ``u``: end of the piece): up to ``E`` of it ``h`` computed more
    than ``g`` (straggler wait for the part due to its slower speed, else bubble: load imbalance);
    the rest is ``h`` doing work ``g`` had done, late because it was held up: communication of the
    class of the flow further back in the chain. Only a slower GPU's compute is straggler wait;
  - anything else (barriers with a duration, unknown categories, start delays a backend leaves
    between a task and its last dependency, a chain that ends early): ``other_s``.

  The trailing gap after ``g``'s last kernel is split at ``e_g``, the finish of ``g``'s last task
  (any of its kernels or flows it sends or receives): ``[a, e_g]`` is blamed on that task, ``[e_g, t1]``
  (``g`` is done, the iteration is not) on the globally last task.

Because each element explains a disjoint piece of ``[a, b]`` and whatever is left goes to
``other_s``, the six terms of a GPU sum to ``T`` (up to float rounding). The definitions, with the
reasons for them, are in ``docs/results.md``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetero_ns3.errors import SimulationError
from hetero_ns3.plan.dag import COMPUTE, FLOW, FUSED_LABEL_SUFFIX, ExecutionPlan, TaskTimes
from hetero_ns3.results.categories import COMM_CLASS, COMPUTE_CLASS, PIPELINE_CATEGORY, class_codes
from hetero_ns3.results.meta import GpuMeta

TERMS = (
    "compute_s",
    "exposed_intra_node_comm_s",
    "exposed_inter_node_comm_s",
    "pipeline_bubble_s",
    "straggler_wait_s",
    "other_s",
)
I_COMPUTE, I_INTRA, I_INTER, I_BUBBLE, I_STRAGGLER, I_OTHER = range(len(TERMS))

#: Tasks per block in :func:`last_finishing_dependency` (bounds its temporaries on plans of 10^8 tasks).
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Breakdown:
    """One GPU's (or an aggregate's) split of the iteration time, in seconds."""

    compute_s: float
    exposed_intra_node_comm_s: float
    exposed_inter_node_comm_s: float
    pipeline_bubble_s: float
    straggler_wait_s: float
    other_s: float

    @classmethod
    def from_array(cls, values: Sequence[float] | np.ndarray) -> Breakdown:
        return cls(*(float(v) for v in values))

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, t) for t in TERMS])

    @property
    def total_s(self) -> float:
        """Sum of the terms; equals the iteration time for one GPU and for means."""
        return float(self.as_array().sum())

    def as_dict(self) -> dict[str, float]:
        return {t: float(getattr(self, t)) for t in TERMS}


def last_finishing_dependency(plan: ExecutionPlan, finish_s: np.ndarray) -> np.ndarray:
    """For each task, the id of its dependency that finishes last (-1 if it has none; int32 below 2**31 tasks).

    Ties go to a flow (communication explains a wait better than a kernel that ended at the same
    instant), then to the larger id. Done in blocks of tasks, so that the temporaries (a few arrays
    over one block's dependencies) stay small next to the plan.
    """
    n = len(plan)
    pred = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)  # task ids: int32 as in dep_idx
    if plan.dep_idx.size == 0:
        return pred
    for lo in range(0, n, _BLOCK):
        hi = min(n, lo + _BLOCK)
        ptr = plan.dep_ptr[lo : hi + 1]
        a = int(ptr[0])
        if int(ptr[-1]) == a:
            continue
        counts = np.diff(ptr)
        owner = np.repeat(np.arange(hi - lo, dtype=np.int64), counts)
        dep = plan.dep_idx[a : int(ptr[-1])].astype(np.int64)
        fin = np.nan_to_num(finish_s[dep], nan=-np.inf)
        is_flow = (plan.kind[dep] == FLOW).astype(np.int8)
        order = np.lexsort((dep, is_flow, fin, owner))
        has = counts > 0
        pred[lo:hi][has] = dep[order[ptr[1:][has] - a - 1]]
    return pred


def _busy_blocks(gpu_ids: np.ndarray, start: np.ndarray, finish: np.ndarray, task_ids: np.ndarray, n_gpus: int):
    """Per GPU, merged busy intervals: list of (block_starts, block_ends, first_task_of_block)."""
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    order = np.lexsort((task_ids, start, gpu_ids))
    g_sorted = gpu_ids[order]
    bounds = np.searchsorted(g_sorted, np.arange(n_gpus + 1))
    for g in range(n_gpus):
        sel = order[bounds[g] : bounds[g + 1]]
        if sel.size == 0:
            out.append((np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)))
            continue
        s, f, ids = start[sel], finish[sel], task_ids[sel]
        reach = np.maximum.accumulate(f)
        new = np.ones(sel.size, dtype=bool)
        new[1:] = s[1:] > reach[:-1]
        first = np.nonzero(new)[0]
        last = np.r_[first[1:] - 1, sel.size - 1]
        out.append((s[first], reach[last], ids[first]))
    return out


def _scalars(a: np.ndarray) -> memoryview:
    """``a`` as a memoryview: indexing gives Python ints and floats, about as fast as a list, without the
    list's pointer and boxed object per element (which cost ~30 GB on a plan of 10^8 tasks)."""
    # numpy's stubs give ndarray __buffer__ only for Python >= 3.12 (mypy checks as 3.11)
    return memoryview(np.ascontiguousarray(a))  # type: ignore[arg-type]


class _Attributor:
    """Holds the plan's columns as memoryviews (fast scalar access, no copy) and walks blame chains."""

    def __init__(self, plan: ExecutionPlan, times: TaskTimes, meta: Sequence[GpuMeta]) -> None:
        self.start = _scalars(times.start_s.astype(np.float64, copy=False))
        self.finish = _scalars(times.finish_s.astype(np.float64, copy=False))
        self.kind = _scalars(plan.kind)
        self.gpu = _scalars(plan.gpu)
        self.dst = _scalars(plan.dst)
        self.cat = _scalars(plan.category)
        self.cat_names = plan.categories
        self.cls = _scalars(class_codes(plan.categories)[plan.category])
        fused_label = np.array([t.endswith(FUSED_LABEL_SUFFIX) for t in plan.labels], dtype=bool)
        self.fused = _scalars(fused_label[plan.label]) if fused_label.any() else None
        self.pred = _scalars(last_finishing_dependency(plan, times.finish_s))
        self.node = [m.node for m in meta]
        self.slow = [float(m.slowdown) for m in meta]
        self.busy = [0.0] * len(meta)  # C_g, set by attribute()
        self.pp_wait = 0.0  # pooled pipeline waits of the GPU being attributed
        self.pp_excess = 0.0  # largest speed-caused load excess among the pipeline peers it waited on

    def _flow_term(self, t: int) -> int:
        return I_INTER if self.node[self.gpu[t]] != self.node[self.dst[t]] else I_INTRA

    def _note_pipeline(self, g: int, waits: list[tuple[float, int]]) -> None:
        """Pool waits of ``g`` on pipeline peers' kernels; :meth:`settle_pipeline` splits the pool.

        A peer ``h``'s speed-caused excess is ``C_h - max(C_g, C_h s_g / s_h)`` (``s`` = slowdown): what
        ``h`` computes beyond ``g`` that it would not compute at ``g``'s speed. Equally fast stages give 0.
        """
        cg, sg = self.busy[g], self.slow[g]
        for x, h in waits:
            self.pp_wait += x
            ch = self.busy[h]
            self.pp_excess = max(self.pp_excess, ch - max(cg, ch * sg / self.slow[h]))

    def settle_pipeline(self, acc: list[float], g: int) -> None:
        """Split ``g``'s pooled pipeline waits into straggler wait and bubble, then reset the pool.

        The most loaded stage ``g`` waited on sets the pipeline's pace: over the iteration it computes
        ``C_worst`` while ``g`` computes ``C_g``; of that excess, the part due to the stage's slower GPU
        (not to more work) is straggler wait, up to the pool; the rest of the pool is bubble.
        """
        strag = min(self.pp_wait, max(0.0, self.pp_excess))
        acc[I_STRAGGLER] += strag
        acc[I_BUBBLE] += self.pp_wait - strag
        self.pp_wait, self.pp_excess = 0.0, 0.0

    def set_blocks(self, blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Per GPU, its merged busy blocks, for :meth:`done` (compute done by a time)."""
        self.b_start = [b[0].tolist() for b in blocks]
        self.b_end = [b[1].tolist() for b in blocks]
        self.b_cum = [np.r_[0.0, np.cumsum(b[1] - b[0])].tolist() for b in blocks]

    def done(self, g: int, t: float) -> float:
        """Compute-busy time of GPU ``g`` from the start of the run to time ``t`` (seconds)."""
        starts = self.b_start[g]
        k = bisect_right(starts, t)
        if k == 0:
            return 0.0
        return self.b_cum[g][k - 1] + min(t, self.b_end[g][k - 1]) - starts[k - 1]

    def _peer(self, acc: list[float], g: int, x: float, h: int, until: float, a: float) -> float:
        """Classify ``x`` seconds of ``g``'s gap ``[a, ...]`` spent on peer ``h``'s kernel (ending at ``until``)
        outside a pipeline context; return the part that is communication (its class is the flow further
        back in the chain: what ``h`` was waiting for before it could do this work).

        ``E = done(h, until) - done(g, a)``: what ``h`` has computed beyond ``g``. Up to ``E`` of the wait,
        ``h`` is late because it computed more: straggler wait for the part of ``h``'s compute due to
        its slower speed (``done(h) (1 - s_g / s_h)``), bubble (load imbalance) for the rest. The wait
        beyond ``E`` is ``h`` doing work ``g`` had already done: ``h`` was held up by waiting, i.e.
        communication.
        """
        dh = self.done(h, until)
        extra = min(x, max(0.0, dh - self.done(g, a)))
        if extra > 0.0:
            strag = min(extra, dh * max(0.0, 1.0 - self.slow[g] / self.slow[h]))
            acc[I_STRAGGLER] += strag
            acc[I_BUBBLE] += extra - strag
        return x - extra

    def walk(self, acc: list[float], g: int, first: int, a: float, hi: float) -> None:
        """Explain ``[a, hi]`` of GPU ``g`` by the chain that starts at task ``first``; add into ``acc``."""
        start, finish, pred = self.start, self.finish, self.pred
        ctx: str | None = None
        pending_peer: list[tuple[float, int, float]] = []
        pipeline: list[tuple[float, int]] = []
        pending_red = 0.0  # communication time waiting for the class of the next flow further back
        last_flow_term = I_INTRA
        cur = first
        while cur >= 0 and hi > a:
            s, f = start[cur], finish[cur]
            lo = max(s, a)
            covered = max(0.0, min(f, hi) - lo)
            if f < hi:
                acc[I_OTHER] += hi - max(f, a)
            if covered > 0.0 or self.kind[cur] == FLOW or self.cls[cur] == COMM_CLASS:
                if self.kind[cur] == FLOW or self.cls[cur] == COMM_CLASS:
                    name = self.cat_names[self.cat[cur]]
                    if ctx is None:
                        for x, h, until in pending_peer:
                            if name == PIPELINE_CATEGORY:
                                pipeline.append((x, h))
                            else:
                                pending_red += self._peer(acc, g, x, h, until, a)
                        pending_peer.clear()
                        ctx = name
                    if self.kind[cur] == FLOW or (self.fused is not None and self.fused[cur]):
                        term = self._flow_term(cur) if self.kind[cur] == FLOW else I_INTRA  # fused: one node
                        acc[term] += covered + pending_red
                        pending_red = 0.0
                        last_flow_term = term
                    else:
                        pending_red += covered
                elif self.cls[cur] == COMPUTE_CLASS and self.gpu[cur] != g:
                    h, until = self.gpu[cur], min(f, hi)
                    if ctx is None:
                        pending_peer.append((covered, h, until))
                    elif ctx == PIPELINE_CATEGORY:
                        pipeline.append((covered, h))
                    else:
                        pending_red += self._peer(acc, g, covered, h, until, a)
                else:
                    acc[I_OTHER] += covered
            hi = min(hi, lo)
            cur = pred[cur]
        if hi > a:
            acc[I_OTHER] += hi - a
        if pending_red or pending_peer:
            # The gap is explained, but some elements still need the class of the communication further
            # back in the chain (it finished before the gap began): look it up without adding time.
            ctx_back, flow_term = self._look_back(cur, need_flow=True)
            for x, h, until in pending_peer:
                if ctx is None and ctx_back == PIPELINE_CATEGORY:
                    pipeline.append((x, h))
                else:  # a collective, or no communication at all
                    pending_red += self._peer(acc, g, x, h, until, a)
            acc[flow_term if flow_term is not None else last_flow_term] += pending_red
        self._note_pipeline(g, pipeline)

    def _look_back(self, cur: int, need_flow: bool, limit: int = 256) -> tuple[str | None, int | None]:
        """From task ``cur`` back along the chain: (category of the first communication element, term of
        the first flow), each None if not met within ``limit`` steps."""
        ctx: str | None = None
        steps = 0
        while cur >= 0 and steps < limit:
            is_flow = self.kind[cur] == FLOW
            if is_flow or self.cls[cur] == COMM_CLASS:
                if ctx is None:
                    ctx = self.cat_names[self.cat[cur]]
                if is_flow:
                    return ctx, self._flow_term(cur)
                if self.fused is not None and self.fused[cur]:
                    return ctx, I_INTRA
                if not need_flow:
                    return ctx, None
            cur = self.pred[cur]
            steps += 1
        return ctx, None


def _last_task_per_gpu(plan: ExecutionPlan, finish: np.ndarray, n_gpus: int) -> np.ndarray:
    """int64 per GPU: its last task to finish (its kernels, and the flows it sends or receives; ties: the
    larger id), -1 for a GPU without tasks. Two passes of ``ufunc.at`` instead of a sort over all tasks,
    each in blocks of tasks (a maximum does not depend on the order: the same result as one pass, with
    temporaries of one block)."""
    latest = np.full(n_gpus, -np.inf)
    best = np.full(n_gpus, -1, dtype=np.int64)
    for find_best in (False, True):
        for lo in range(0, len(plan), _BLOCK):
            hi = min(len(plan), lo + _BLOCK)
            gpu, fin = plan.gpu[lo:hi], finish[lo:hi]
            flow_ids = np.flatnonzero(plan.kind[lo:hi] == FLOW)
            flow_dst, flow_fin = plan.dst[lo:hi][flow_ids], fin[flow_ids]
            if not find_best:
                np.maximum.at(latest, gpu, fin)
                np.maximum.at(latest, flow_dst, flow_fin)
                continue
            hit = np.flatnonzero(fin == latest[gpu])
            np.maximum.at(best, gpu[hit], hit + lo)
            hit = np.flatnonzero(flow_fin == latest[flow_dst])
            np.maximum.at(best, flow_dst[hit], flow_ids[hit] + lo)
    return best


def attribute(
    plan: ExecutionPlan, times: TaskTimes, meta: Sequence[GpuMeta], window_start_s: float | None = None
) -> tuple[float, np.ndarray]:
    """Window length and the per-GPU breakdown matrix ``(n_gpus, len(TERMS))`` in seconds.

    The window is ``[t0, t1]`` (first start to last finish), or ``[window_start_s, t1]`` if given
    (a run of several iterations attributes its steady-state iterations only: kernels and gaps
    before ``window_start_s`` are cut off; blame chains may still reach back before it to find
    what a wait inside the window was for). Each GPU's terms sum to the window length.
    """
    n = len(plan)
    n_gpus = len(plan.gpus)
    if len(meta) != n_gpus:
        raise SimulationError(f"breakdown: {len(meta)} GpuMeta entries for {n_gpus} plan GPUs")
    if times.start_s.shape != (n,) or times.finish_s.shape != (n,):
        raise SimulationError(f"breakdown: task times have shape {times.start_s.shape}, plan has {n} tasks")
    out = np.zeros((n_gpus, len(TERMS)))
    if n == 0:
        return 0.0, out
    if not (np.all(np.isfinite(times.start_s)) and np.all(np.isfinite(times.finish_s))):
        raise SimulationError("breakdown: some tasks have no finish time (NaN); a partial run has no breakdown")
    start, finish = times.start_s, times.finish_s
    t0, t1 = float(start.min()), float(finish.max())
    if window_start_s is not None:
        if not t0 <= window_start_s <= t1:
            raise SimulationError(f"breakdown: window start {window_start_s} s is outside the run [{t0}, {t1}] s")
        t0 = float(window_start_s)
    cls = class_codes(plan.categories)[plan.category]
    work = (plan.kind == COMPUTE) & (cls == COMPUTE_CLASS) & (plan.stream >= 0) & (finish > start)
    blocks = _busy_blocks(plan.gpu[work].astype(np.int64), start[work], finish[work], np.flatnonzero(work), n_gpus)

    g_last_of = _last_task_per_gpu(plan, finish, n_gpus)
    global_last = int(np.flatnonzero(finish == finish.max())[-1])  # the last to finish; ties: the larger id

    att = _Attributor(plan, times, meta)
    att.set_blocks(blocks)
    att.busy = [float((be - np.maximum(bs, t0)).clip(min=0.0).sum()) for bs, be, _ in blocks]
    for g in range(n_gpus):
        acc = [0.0] * len(TERMS)
        b_start, b_end, b_task = blocks[g]
        acc[I_COMPUTE] = att.busy[g]
        a = t0
        for bs, be, k in zip(b_start.tolist(), b_end.tolist(), b_task.tolist(), strict=True):
            if be <= a:  # a block wholly before the window
                continue
            if bs > a:
                att.walk(acc, g, att.pred[k], a, bs)
            a = be
        # Trailing gap: [a, e_g] blamed on g's last task, [e_g, t1] on the globally last task.
        g_last = int(g_last_of[g])
        if g_last >= 0:
            e_g = finish[g_last]
            if e_g > a:
                att.walk(acc, g, g_last, a, e_g)
                a = e_g
        if t1 > a:
            att.walk(acc, g, global_last, a, t1)
        att.settle_pipeline(acc, g)
        out[g] = acc
    return t1 - t0, out
