"""The host thread that issues each rank's kernels: per-kernel issue cost, synchronisation points, CUDA graphs.

A training process drives its GPU from one host thread: Python and the framework turn every module call into
kernel launches, which the GPU runs in order from its launch queue. While the host issues faster than the GPU
computes, the queue stays full and the host costs nothing. It shows when (a) kernels are shorter than their issue
cost (small, fine-grained MoE experts, many element-wise kernels) or (b) the host waits for the GPU: a
device-to-host copy the host needs before it can issue more work drains the queue, and after it the GPU runs
only as fast as the host refills it. Megatron-Core's dropless MoE token dispatchers do (b) once per MoE layer's
forward: the split sizes of the expert-parallel exchange (and the grouped GEMMs' per-expert row counts) are
copied to the host and the stream synchronised (``MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize``;
the flex / HybridEP dispatcher sizes its buffers from ``tokens_per_expert.sum()`` the same way unless given the
permuted token count).

The model (docs/compute.md, "Host issue model"): every compute op of a rank gets a host task on the rank's host
stream (:data:`hetero_ns3.plan.dag.HOST_STREAM`, in program order), of ``op_s`` per modelled kernel plus
``launch_s`` per further member of a grouped expert GEMM; a blocking collective call of a layer (the
expert-parallel exchanges, tensor-parallel collectives) gets a host task of ``op_s`` too. An op cannot start on
the GPU before its host task finished. Asynchronous calls (data-parallel gradient buckets, pipeline sends and
receives) are issued off the host chain at no cost: one launch each, against a layer's dozens. After an op marked
``host_sync`` (the MoE layer's routing step, forward and recomputed forward), the next host task waits for that
op to finish on the GPU, and then, with ``sync_gap_s`` > 0, spends a further gap of mean ``sync_gap_s`` before it
issues anything (the framework's Python between the device-to-host copy and the next launch): a part every rank
spends alike plus each rank's own draw from an exponential distribution of mean ``sync_jitter x sync_gap_s`` (what
differs from rank to rank), so the group's next blocking exchange waits for its slowest host
(:func:`hetero_ns3.plan.lower.lower_workload` draws the gaps). Steps of a module captured
in a CUDA graph (``graph_scopes``) cost ``graph_s`` per step instead of their kernels' issue cost. ``op_s = launch_s
= sync_gap_s = 0`` (:class:`HostModel`'s defaults) turns the model off: no host tasks, plans as without it; a
scenario's ``[compute]`` section defaults the gap to :data:`HOST_SYNC_GAP_S`, which acts only where a step
synchronises the host.

Units: seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero_ns3.compute.recipes import cast_elements
from hetero_ns3.compute.roofline import Kernel

#: CUDA-graph scopes (Megatron-Core's ``cuda_graph_scope`` names this model supports) -> the step-name prefixes
#: of :mod:`hetero_ns3.workload.layers` / :mod:`hetero_ns3.workload.moe` they capture (forward and backward,
#: as Transformer Engine's ``make_graphed_callables`` captures both). ``moe_router`` holds the routing step
#: (router GEMM, top-k, the permutation's preparation); the experts of a dropless MoE cannot be captured
#: (dynamic shapes), so there is no ``moe`` scope.
GRAPH_SCOPES: dict[str, tuple[str, ...]] = {
    "attn": ("attn",),
    "mlp": ("mlp",),
    "moe_router": ("moe.route",),
}

#: Step-name prefix of the routed experts, whose GEMMs are grouped: one launch per local expert (Transformer
#: Engine's ``GroupedLinear`` issues a GEMM per expert from C++; ``Kernel.batch`` is the expert count).
GROUPED_STEP = "moe.experts"

#: Step names after which a dropless MoE dispatcher synchronises the host (:meth:`HostModel.is_sync_step`).
SYNC_STEPS = frozenset({"moe.route", "recompute.moe.route"})

#: A published rank-0 Nsight profile of Megatron-Core with HybridEP on 16 H100 (Qwen3-30B-A3B, BF16, EP 16;
#: Megatron-Bridge's expert-parallel overlap skill): the GPU idle for 1.893 s of a 24.714 s step (22.821 s of
#: GPU-active union), over 64 micro-batches x 48 MoE layers = 3,072 forward dispatches, each after a host
#: synchronisation, across the expert-parallel group of 16 ranks.
PROFILE_IDLE_S, PROFILE_SYNCS, PROFILE_GROUP = 1.893, 3072, 16
#: The same profile's communication excess over the model without gaps, seconds: its exchange kernels ran 8.254 s
#: (7.90-8.65 by how concurrent kernels are counted) where the model's run 4.686 s; read as the time rank 0's
#: exchanges waited for the slowest host of the EP 16 group (an upper bound: a slower exchange counts in it too).
PROFILE_COMM_EXCESS_S = 8.254 - 4.686

#: Default mean host gap after a synchronisation (``[compute] host_sync_gap``), seconds: the profile's idle per
#: synchronisation, 1.893 / 3072 = 0.616 ms (an upper bound: any other idle of the step counts in it).
#: docs/compute.md "Host gaps after a synchronisation".
HOST_SYNC_GAP_S = round(PROFILE_IDLE_S / PROFILE_SYNCS, 6)


def jitter_share(idle_s: float, excess_s: float, syncs: int, group: int) -> float:
    """The share of the mean host gap that differs from rank to rank, fitted to a profile's two figures.

    A gap is ``c + X``: a part ``c`` every rank spends alike, and an exponential ``X`` of mean ``mu`` drawn per rank.
    One rank's idle per synchronisation is its own gap, ``c + mu = idle_s / syncs``; its exchange then waits for
    the slowest of ``group`` hosts, ``(H_group - 1) mu = excess_s / syncs`` (``H`` the harmonic number: the
    expected maximum of ``group`` exponentials is ``H_group`` means). Returns ``mu / (c + mu)``, clipped to 1."""
    harmonic = sum(1.0 / k for k in range(1, group + 1))
    mu = excess_s / syncs / (harmonic - 1.0)
    return min(1.0, mu / (idle_s / syncs))


#: Default share of the host gap drawn independently per rank (``[compute] host_sync_jitter``): the profile's two
#: figures fitted by :func:`jitter_share`, 0.792 (mean 0.488 ms drawn per rank on a common 0.128 ms). docs/compute.md
#: "Host gaps after a synchronisation".
HOST_SYNC_JITTER = round(jitter_share(PROFILE_IDLE_S, PROFILE_COMM_EXCESS_S, PROFILE_SYNCS, PROFILE_GROUP), 3)


@dataclass(frozen=True)
class HostModel:
    """Host issue costs of one scenario (``[compute] host_op``, ``host_launch``, ``host_graph``, ``moe_host_sync``,
    ``cuda_graphs``).

    Attributes:
        op_s: host seconds to issue one modelled kernel or collective call eagerly (Python, framework
            dispatch and the launch); 0 with ``launch_s`` 0: the host is not modelled.
        launch_s: host seconds per further member of a batched kernel (a grouped GEMM's per-expert launches).
        graph_s: host seconds to replay one captured step (a CUDA graph launch).
        moe_sync: the dropless MoE dispatcher synchronises the host once per MoE layer forward.
        graph_scopes: the captured scopes (keys of :data:`GRAPH_SCOPES`).
        sync_gap_s: mean host seconds between a synchronisation's return and the next issue; 0: no gap.
        sync_jitter: share of ``sync_gap_s`` drawn per rank and synchronisation from an exponential distribution;
            the rest every rank spends alike (1: the whole gap is drawn, 0: every rank waits the mean).
        expert_cast_launches: kernels the precision recipe launches per expert to quantize a grouped expert GEMM's
            input expert by expert (:attr:`hetero_ns3.compute.recipes.Recipe.expert_cast_launches`; 0: one fused
            cast, or no quantization); each costs ``launch_s`` on the host like a further GEMM member.
    """

    op_s: float = 0.0
    launch_s: float = 0.0
    graph_s: float = 0.0
    moe_sync: bool = True
    graph_scopes: tuple[str, ...] = ()
    sync_gap_s: float = 0.0
    expert_cast_launches: int = 0
    sync_jitter: float = 1.0

    @property
    def active(self) -> bool:
        """Whether the host is modelled at all."""
        return self.op_s > 0 or self.launch_s > 0 or self.sync_gap_s > 0

    def captured(self, step_name: str) -> bool:
        """Whether the step named ``step_name`` (``recompute.`` prefix ignored) runs inside a CUDA graph."""
        name = step_name.removeprefix("recompute.")
        for scope in self.graph_scopes:
            for prefix in GRAPH_SCOPES[scope]:
                if name == prefix or name.startswith(prefix + "."):
                    return True
        return False

    def step_s(self, step_name: str, kernels: tuple[Kernel, ...]) -> float:
        """Host seconds to issue one compute step."""
        if not self.active:
            return 0.0
        if self.captured(step_name):
            return self.graph_s
        grouped = step_name.removeprefix("recompute.").startswith(GROUPED_STEP)
        return sum(self.op_s + (self._grouped_launches(k) * self.launch_s if grouped else 0.0) for k in kernels)

    def _grouped_launches(self, k: Kernel) -> int:
        """Launches of a grouped expert GEMM beyond its first: one GEMM per further expert, and the per-expert
        quantization kernels of its input where the recipe quantizes expert by expert."""
        if k.op != "gemm" or k.batch <= 1:
            return 0
        casts = self.expert_cast_launches * k.batch if self.expert_cast_launches and cast_elements(k) else 0
        return k.batch - 1 + casts

    def comm_s(self, step_name: str) -> float:
        """Host seconds to issue one collective call of a layer program."""
        if not self.active or self.captured(step_name):
            return 0.0
        return self.op_s

    def is_sync_step(self, step_name: str) -> bool:
        """Whether the host waits for this step's GPU completion before issuing the next op."""
        return self.active and self.moe_sync and step_name in SYNC_STEPS
