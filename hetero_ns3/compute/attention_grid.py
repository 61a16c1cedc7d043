"""Where a fused attention kernel's work lands on the GPU: the masked fraction and executed tiles of a causal sliding
window, and the busy fraction of the SMs when the kernel's row blocks are handed out one per SM in grid order.

Pure functions of the kernel's grid (sequence length, window, tile, heads, SM count); the roofline
(:mod:`hetero_ns3.compute.roofline`) scales attention rates by them (docs/compute.md "Occupancy", "Sliding-window
attention").
"""

from __future__ import annotations

import functools
import heapq
import math


def window_fraction(s: int, w: int) -> float:
    """Fraction of the ``s x w`` band a causal window of ``w`` keys (``w <= s``) keeps: query ``i`` (0-based)
    sees ``min(i + 1, w)`` keys, ``w s - w (w - 1) / 2`` pairs in all."""
    return (w * s - w * (w - 1) / 2) / (s * w)


@functools.lru_cache(maxsize=1024)
def window_tiles(s: int, w: int, tile: int) -> int:
    """Tiles (``tile x tile``, ``n = ceil(s / tile)`` per side) a causal sliding-window kernel computes: row block
    ``j`` runs every key block from the one holding its first row's oldest key, ``j tile - w + 1``, to the
    diagonal, ``j``, each whole (the tile rule of ``attention_causal_tile`` applied to the band)."""
    n = math.ceil(s / tile)
    return sum(j - max(0, j * tile - w + 1) // tile + 1 for j in range(n))


@functools.lru_cache(maxsize=4096)
def attention_occupancy(heads: int, blocks: int, causal: bool, sms: int, band: int = 0) -> float:
    """Busy fraction of ``sms`` SMs running ``heads`` (batch x heads) x ``blocks`` row blocks of a fused attention
    kernel, one block per SM, handed out in grid order (head-major, row blocks ascending) to the SM that frees
    first: block ``i`` costs ``i + 1`` units under a causal mask (``min(i + 1, band)`` under a sliding window
    spanning ``band`` key blocks), ``blocks`` units under a full one."""
    if heads <= 0 or blocks <= 0 or sms <= 0:
        return 1.0
    if not causal:
        n = heads * blocks
        return n / (math.ceil(n / sms) * sms)
    cost = [min(i + 1, band) if band else i + 1 for i in range(blocks)]
    free = [0] * min(sms, heads * blocks)
    heapq.heapify(free)
    for _ in range(heads):
        for c in cost:
            heapq.heappush(free, heapq.heappop(free) + c)
    return heads * sum(cost) / (sms * max(free))
