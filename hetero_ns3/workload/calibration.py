"""The Megatron SC'21 calibration set and a closed-form step-time model for fitting compute constants.

The ten rows of Narayanan et al. (SC'21) Table 1 (``hetero_ns3/data/validation/megatron_sc21.csv``)
are homogeneous A100 runs with every DP replica identical, so one iteration is

``T = (M - 1) max_s t_s + sum_s t_s + t_dp + t_opt + t_host``

with ``M`` microbatches per replica, ``t_s`` the forward + backward time of one microbatch on
stage ``s`` (kernels from the same layer programs the compiler emits, timed by the roofline, plus the
blocking TP collectives timed by the collective cost model), ``t_dp`` the gradient all-reduce after
the last backward (Megatron 2021 did not overlap it), ``t_opt`` the optimizer step and ``t_host``
the per-iteration host overhead. This is what ``scripts/fit_compute.py`` minimises over; the full
simulator (``hetero-ns3 validate``) is the check (docs/compute.md, docs/validation.md).
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hetero_ns3.compute.gpus import GpuSpec, get_gpu
from hetero_ns3.compute.roofline import Efficiency, Roofline
from hetero_ns3.paths import PACKAGE_DATA
from hetero_ns3.workload import layers as L
from hetero_ns3.workload.compiler import OPTIMIZER_BYTES_PER_PARAM, CompileSpec, StepPrograms
from hetero_ns3.workload.memory import embedding_params_per_rank, head_params_per_rank, layer_params_per_rank
from hetero_ns3.workload.models import ModelSpec
from hetero_ns3.workload.parallel import ParallelismSpec

ROWS_CSV = PACKAGE_DATA / "validation" / "megatron_sc21.csv"
VOCAB = 51200
SEQ = 2048
GPU = "A100-SXM-80GB"
NIC_BUSBW_BPS = 24e9
"""Bus bandwidth of one 200G HDR NIC in NCCL all-reduce (NCCL maintainers, shared/reference/calibration)."""


@dataclass(frozen=True)
class MegatronRow:
    """One row of SC'21 Table 1 (sizes as published; ``tflops_per_gpu`` counts the paper's formula)."""

    name: str
    params_b: float
    layers: int
    hidden: int
    heads: int
    gpus: int
    tp: int
    pp: int
    dp: int
    global_batch: int
    tflops_per_gpu: float

    @property
    def paper_flops(self) -> float:
        """FLOPs of one iteration by the paper's formula 96 B s l h^2 (1 + s/6h + V/16lh)."""
        b, s, l_, h = self.global_batch, SEQ, self.layers, self.hidden
        return 96.0 * b * s * l_ * h * h * (1 + s / (6 * h) + VOCAB / (16 * l_ * h))

    @property
    def published_step_s(self) -> float:
        """Iteration time the published TFLOP/s per GPU implies."""
        return self.paper_flops / (self.gpus * self.tflops_per_gpu * 1e12)

    @property
    def microbatches(self) -> int:
        return self.global_batch // self.dp


@functools.cache
def load_rows(path: str | None = None) -> tuple[MegatronRow, ...]:
    """The calibration rows (``#`` lines are comments)."""
    p = Path(path) if path else ROWS_CSV
    with open(p, newline="") as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        ints = {k: int(r[k]) for k in ("layers", "hidden", "heads", "gpus", "tp", "pp", "dp", "global_batch")}
        rows.append(MegatronRow(r["name"], float(r["params_B"]), **ints, tflops_per_gpu=float(r["tflops_per_gpu"])))
    return tuple(rows)


def row_model(row: MegatronRow) -> ModelSpec:
    """GPT shape of a row: 4h MLP, learned positions, tied embeddings, dropout, vocab 51200, seq 2048."""
    return ModelSpec(
        name=row.name,
        layers=row.layers,
        hidden=row.hidden,
        heads=row.heads,
        ffn_hidden=4 * row.hidden,
        vocab=VOCAB,
        seq_len=SEQ,
        bias=True,
        tie_embeddings=True,
        learned_pos_emb=True,
        dropout=True,
        source="Narayanan et al., SC'21, Table 1",
    )


def row_plan(row: MegatronRow) -> ParallelismSpec:
    """Megatron-LM as of April 2021: full recomputation, 1F1B, micro-batch 1, FP16 gradients
    all-reduced after the backward pass (no distributed optimizer, no overlap), uniform stages."""
    return ParallelismSpec(
        tp=row.tp,
        pp=row.pp,
        dp=row.dp,
        micro_batch=1,
        global_batch=row.global_batch,
        schedule="1f1b",
        recompute="full",
        zero_stage=0,
        overlap_grad_reduce=False,
        grad_reduce_dtype="fp16",
        partition="uniform",
    )


def _tp_allreduce_s(nbytes: float, tp: int) -> float:
    """Predicted time of a TP all-reduce of ``nbytes`` inside one DGX A100 (collective cost model)."""
    if tp < 2:
        return 0.0
    from hetero_ns3.collectives import CollectiveCall, plan_collective
    from hetero_ns3.plan.builder import PlanBuilder

    env, gpus = _node_env()
    group = gpus[:tp]
    res = plan_collective(PlanBuilder(group), CollectiveCall("all_reduce", group, int(nbytes)), env)
    return float(res.predicted_s)


@functools.cache
def _node_env():  # one DGX-A100-like node of the a100-fattree preset
    from hetero_ns3.collectives import CollectiveEnv
    from hetero_ns3.topology import resolve_topology

    graph = resolve_topology("a100-fattree")
    env = CollectiveEnv.from_graph(graph)
    return env, tuple(g for g in env.gpus if g.startswith("n0."))


@dataclass(frozen=True)
class StepEstimate:
    """Closed-form pieces of one iteration, seconds."""

    pipeline_s: float
    tp_comm_s: float
    dp_s: float
    optimizer_s: float
    host_s: float

    @property
    def total_s(self) -> float:
        return self.pipeline_s + self.dp_s + self.optimizer_s + self.host_s


def estimate_step(
    row: MegatronRow,
    roofline: Roofline,
    host_s: float = 0.0,
    gpu_of: Callable[[str], GpuSpec] = get_gpu,
) -> StepEstimate:
    """Closed-form iteration time of ``row`` (module docstring) under ``roofline``."""
    model, plan = row_model(row), row_plan(row)
    layers_per_stage = row.layers // row.pp
    spec = CompileSpec(model, plan, (layers_per_stage,) * row.pp, (row.microbatches,) * row.dp, roofline, gpu_of, False)
    progs = StepPrograms(spec)

    def compute(what: str) -> float:
        return sum(progs.cost(GPU, st.kernels)[2] for st in progs.program(what) if isinstance(st, L.Compute))

    def blocking_tp(what: str) -> float:
        t = 0.0
        for st in progs.program(what):
            if isinstance(st, L.Comm) and st.dim == "tp" and st.mode == "blocking":
                t += _tp_allreduce_s(st.bytes, row.tp)
        return t

    layer = compute("layer_f") + compute("layer_b")
    layer_tp = blocking_tp("layer_f") + blocking_tp("layer_b")
    emb = compute("emb_f") + compute("emb_b")
    emb_tp = blocking_tp("emb_f") + blocking_tp("emb_b")
    head = compute("head_f") + compute("head_b")
    head_tp = blocking_tp("head_f") + blocking_tp("head_b")
    stages = []
    for s in range(row.pp):
        t = layers_per_stage * (layer + layer_tp)
        if s == 0:
            t += emb + emb_tp
        if s == row.pp - 1:
            t += head + head_tp
        stages.append(t)
    m = row.microbatches
    pipeline = (m - 1) * max(stages) + sum(stages)
    tp_comm = (m - 1 + row.pp) * layers_per_stage * layer_tp
    # Gradient all-reduce of the largest stage's parameters (stage 0 holds the embedding).
    params = layers_per_stage * layer_params_per_rank(model, 0, row.tp, 1).dense
    params += embedding_params_per_rank(model, row.tp) if row.pp > 1 else 0.0
    if row.pp == 1:
        params += embedding_params_per_rank(model, row.tp) + head_params_per_rank(model, row.tp, row.pp)
    gpn = max(1, 8 // row.tp)  # GPUs of one DP group per node, each with its own NIC
    n = row.dp
    dp_s = 2.0 * (n - 1) / n * params * 2.0 / (gpn * NIC_BUSBW_BPS) if n > 1 else 0.0
    gpu = gpu_of(GPU)
    eff = roofline.efficiency(gpu)
    opt = OPTIMIZER_BYTES_PER_PARAM * params / (gpu.hbm_bw_Bps * eff.memory) + eff.launch_overhead_s
    return StepEstimate(pipeline, tp_comm, dp_s, opt, host_s)


@dataclass(frozen=True)
class FitParams:
    """The fitted A100 constants (shared by all rows)."""

    sustained: float
    gemm_dim_half: float
    memory: float
    launch_overhead_us: float
    host_overhead_ms: float

    def roofline(self, base: Efficiency) -> Roofline:
        eff = replace(
            base,
            sustained=self.sustained,
            gemm_dim_half=self.gemm_dim_half,
            memory=self.memory,
            launch_overhead_s=self.launch_overhead_us * 1e-6,
        )
        rf = Roofline("fp16")
        rf._eff[GPU] = eff  # the candidate constants for the A100 row GPU
        return rf


def residuals(params: FitParams, rows: Sequence[MegatronRow] | None = None) -> list[tuple[MegatronRow, float, float]]:
    """(row, published step s, estimated step s) for each row under ``params``."""
    from hetero_ns3.compute.roofline import default_efficiency

    rows = rows or load_rows()
    rf = params.roofline(default_efficiency(get_gpu(GPU)))
    out = []
    for r in rows:
        est = estimate_step(r, rf, params.host_overhead_ms * 1e-3).total_s
        out.append((r, r.published_step_s, est))
    return out


def mape(res: Sequence[tuple[MegatronRow, float, float]]) -> float:
    """Mean absolute percentage error of the step time, percent."""
    return 100.0 * sum(abs(e - p) / p for _r, p, e in res) / len(res)


def max_ape(res: Sequence[tuple[MegatronRow, float, float]]) -> float:
    return 100.0 * max(abs(e - p) / p for _r, p, e in res)


#: DGX nodes per scalable unit (SU) of the DGX SuperPOD with DGX A100 (Selene's design): one rail-optimized
#: leaf switch per NIC rail per SU, 20 nodes each.
SU_NODES = 20


def topology_toml(row: MegatronRow) -> str:
    """Selene-like cluster of ``row``: DGX A100 80GB nodes (NVSwitch, 8x 200G HDR) on the DGX SuperPOD's
    rail-optimized, non-blocking InfiniBand fabric.

    Selene is a DGX SuperPOD with DGX A100 (NVIDIA reference architecture RA-09950-001, 2020): scalable units
    of 20 DGX A100, in each SU NIC ``i`` of every node cabled to the SU's leaf switch of rail ``i`` (HDR,
    40 ports: 20 down, 20 up), leaves to spine groups without oversubscription. The NVIDIA reference
    architectures since then describe the compute fabric the same way ("rail-optimized"). Traffic between
    GPUs of the same index inside one SU (NCCL's rings and trees across nodes, Megatron's pipeline and data
    parallel peers) stays on one leaf switch. Across SUs it crosses a spine, on the static routes an
    InfiniBand subnet manager installs (one output port per destination, no per-flow hash): ``routing =
    "dmodk"`` (docs/topologies.md, "Static D-mod-K routing").
    """
    nodes = row.gpus // 8
    return f'''name = "selene-{nodes}"
description = "{nodes} DGX A100 80GB nodes (NVSwitch, 8x 200G HDR) on a rail-optimized non-blocking fabric (SUs of {SU_NODES} nodes), as Selene (Narayanan et al., SC'21; DGX SuperPOD A100 reference architecture)"

[[groups]]
name = "a100"
count = {nodes}
gpu = "{GPU}"
gpus_per_node = 8
fabric = {{ kind = "nvswitch", pcie_gen = 4, pcie_lanes = 16 }}
nics = {{ count = 8, rate = "200Gbps" }}

[network]
kind = "rail"
rails = 8
nodes_per_pod = {SU_NODES}            # one scalable unit: NIC i of its {SU_NODES} nodes on leaf (rail) switch i
spines = {SU_NODES}
access_delay = "1us"
rail = {{ uplink_rate = "200Gbps", uplink_delay = "1us", buffer = "16MiB", uplinks = {SU_NODES} }}   # 20 down, 20 up: non-blocking
spine = {{ buffer = "32MiB" }}
routing = "dmodk"             # InfiniBand: static per-destination routes from the subnet manager, no ECMP hash
'''


def scenario_toml(row: MegatronRow) -> str:
    """Scenario file of ``row`` (settings of :func:`row_model` and :func:`row_plan`)."""
    m, p = row_model(row), row_plan(row)
    return f'''# Megatron SC'21 Table 1 row {row.name}: {row.gpus} A100, TP {row.tp} PP {row.pp} DP {row.dp}, batch {row.global_batch}.
# Published {row.tflops_per_gpu:g} TFLOP/s per GPU = {row.published_step_s:.3f} s per iteration (paper's FLOP formula).
# Generated by scripts/make_validation_scenarios.py; run with
#   hetero-ns3 run hetero_ns3/data/validation/megatron/{row.name}.toml --backend analytic

[model]
name = "{m.name}"
layers = {m.layers}
hidden = {m.hidden}
heads = {m.heads}
ffn_hidden = {m.ffn_hidden}
vocab = {m.vocab}
seq_len = {m.seq_len}
bias = true
tie_embeddings = true
learned_pos_emb = true
dropout = true

[parallelism]
tp = {p.tp}
pp = {p.pp}
dp = {p.dp}
global_batch = {p.global_batch}
micro_batch = {p.micro_batch}
schedule = "{p.schedule}"
recompute = "{p.recompute}"
zero_stage = {p.zero_stage}
overlap_grad_reduce = false
grad_reduce_dtype = "{p.grad_reduce_dtype}"
partition = "{p.partition}"

[cluster]
topology = "selene-{row.gpus // 8}.toml"

[compute]
precision = "fp16"
flash_attention = false   # Megatron-LM 2021: unfused attention (baddbmm, fused softmax, dropout, bmm)

[run]
backend = "analytic"
reuse_isolated_collectives = "on"   # TP-8 calls on a node's NVSwitch: one task per rank (docs/collectives.md)
'''
