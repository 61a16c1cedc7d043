"""The hybrid layer pattern and the Mamba-2 mixer's shapes, parameters and FLOPs (a mixin of
:class:`hetero_ns3.workload.models.ModelSpec`; docs/workload.md "Hybrid models")."""

from __future__ import annotations

from hetero_ns3.workload.model_checks import HYBRID_BLOCKS


class HybridLayers:
    """What :class:`~hetero_ns3.workload.models.ModelSpec` derives from ``hybrid_pattern`` and the ``mamba_*`` fields
    (declared here for the type checker; the dataclass holds them)."""

    hybrid_pattern: str
    hidden: int
    seq_len: int
    mamba_heads: int
    mamba_head_dim: int
    mamba_state: int
    mamba_groups: int
    mamba_conv: int
    mamba_chunk: int

    @property
    def hybrid(self) -> bool:
        """Whether the layers follow a ``hybrid_pattern`` (one block per layer)."""
        return bool(self.hybrid_pattern)

    def layer_block(self, layer: int) -> str:
        """What layer ``layer`` holds: ``transformer`` (attention and an MLP or MoE block), or in a hybrid model one of
        ``mamba``, ``attention``, ``mlp``, ``moe`` (:data:`HYBRID_BLOCKS`)."""
        return HYBRID_BLOCKS[self.hybrid_pattern[layer]] if self.hybrid_pattern else "transformer"

    def has_attention(self, layer: int) -> bool:
        """Whether layer ``layer`` runs self-attention."""
        return self.layer_block(layer) in ("transformer", "attention")

    @property
    def mamba_inner(self) -> int:
        """The Mamba-2 mixer's inner width d_inner = ``mamba_heads x mamba_head_dim`` (x, z and the output)."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def mamba_conv_dim(self) -> int:
        """Channels of the causal convolution: x, B and C, ``d_inner + 2 x groups x state``."""
        return self.mamba_inner + 2 * self.mamba_groups * self.mamba_state

    @property
    def mamba_in_dim(self) -> int:
        """Width of the Mamba-2 input projection: z, x, B, C and dt, ``2 d_inner + 2 groups state + heads``."""
        return 2 * self.mamba_inner + 2 * self.mamba_groups * self.mamba_state + self.mamba_heads

    def mamba_params(self) -> int:
        """Parameters of one Mamba-2 mixer (Megatron-Core's ``MambaMixer``): the input projection h x
        :attr:`mamba_in_dim`, the convolution's weights and biases (:attr:`mamba_conv_dim` x (width + 1)), dt's bias,
        A and D per head, the gated norm's weight (d_inner) and the output projection d_inner x h. Nemotron 3 Nano:
        38.74 M."""
        h, di = self.hidden, self.mamba_inner
        conv = self.mamba_conv_dim * (self.mamba_conv + 1)
        return h * self.mamba_in_dim + conv + 3 * self.mamba_heads + di + di * h

    def mamba_forward_flops(self, batch: int) -> float:
        """Forward FLOPs of one Mamba-2 mixer for ``batch`` sequences: the input and output projections, and the SSD
        scan's matrix products counted whole as the attention square is (Dao & Gu 2024, arXiv 2405.21060, Sec. 6:
        per chunk of Q tokens C B^T, 2 Q^2 N per group, its product with x, 2 Q^2 P per head, the chunk's state
        B^T x and the state's output C h, 2 Q N P per head each): per token 2 Q G N + 2 Q d_inner + 4 d_inner N."""
        t, h, di = batch * self.seq_len, self.hidden, self.mamba_inner
        q, n = self.mamba_chunk, self.mamba_state
        proj = 2 * t * h * (self.mamba_in_dim + di)
        ssd = t * (2 * q * self.mamba_groups * n + 2 * q * di + 4 * di * n)
        return float(proj + ssd)
