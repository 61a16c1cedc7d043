"""NCCL-like tuning constants, loaded from ``collectives/tuning.toml`` (sources are cited there).

Latencies are stored in seconds here (the file says microseconds, as NCCL's tables do).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetero_ns3.collectives.types import ALL_REDUCE, PROTOCOLS
from hetero_ns3.errors import field_error
from hetero_ns3.inputs import read_toml
from hetero_ns3.paths import preset_dir

LINK_KINDS = ("nvlink", "pcie", "network")
LAT_ALGOS = ("tree", "ring")
#: Fallback location inside the package tree when no project home is found.
_REPO_FILE = Path(__file__).resolve().parents[2] / "collectives" / "tuning.toml"


@dataclass(frozen=True)
class LinkTuning:
    """How the planner treats one fabric (``nvlink``, ``pcie``, ``network``)."""

    wire_overhead: float
    """Wire bytes per payload byte added by the plan on paths whose slowest link is of this kind."""
    efficiency: float
    """Fraction of the payload rate the cost model expects on this fabric."""
    wire_overhead_by_arch: Mapping[str, float] = field(default_factory=dict)
    """Per GPU architecture (``Hopper``...): ``wire_overhead`` on paths between GPUs of that
    architecture; architectures not listed (and plain hosts) use ``wire_overhead``."""

    def overhead(self, architecture: str = "") -> float:
        """Wire bytes per payload byte on a path between GPUs of ``architecture``."""
        return self.wire_overhead_by_arch.get(architecture, self.wire_overhead)


NCCL_MAX_NVLS_ARITY = 32
"""NCCL's most NVLS heads (channels of the NVLS graph) per node (``src/include/device.h``)."""


@dataclass(frozen=True)
class NvlsTuning:
    """NVLink SHARP constants (``[nvls]`` of the tuning file; sources cited there)."""

    efficiency: Mapping[str, float]
    """Per GPU architecture: fraction of the effective NVLink bandwidth NVLS traffic reaches."""
    latency_s: float
    """Latency of an NVLS / NVLS-Tree call inside a node, s."""
    tree_net_latency_s: float
    """NVLS-Tree latency per tree level across nodes (x 2 log2 nodes), s."""
    channels: int
    chunk_bytes: int
    chunk_rule: tuple[tuple[int, int], ...]
    """(factor, chunk): the chunk becomes ``chunk`` when the buffer < factor x channels x heads x chunk."""
    tree_chunk_rule: tuple[tuple[int, int], ...]
    tree_max_chunk_bytes_4_nodes: int
    tree_max_channel_Bps: Mapping[str, tuple[float, float, float]]
    """Per architecture, NVLS-Tree per-channel bandwidth cap at 1 / 2 / >= 4 nodes, bytes/s."""
    chunk_overhead_bytes: float
    """Link time per chunk operation beyond its payload, as bytes at the NVLS rate."""
    max_rounds: int
    max_heads: int = NCCL_MAX_NVLS_ARITY
    """Most NVLS heads per node: larger NVLink domains reduce through this many."""

    def heads(self, op: str, n: int) -> int:
        """Heads of an NVLS ``op`` over ``n`` ranks of a node: all-reduce at most ``max_heads``, else every rank."""
        return min(n, self.max_heads) if op == ALL_REDUCE else n

    def chunk(self, size_bytes: int, heads: int, tree: bool = False, nodes: int = 1) -> int:
        """NCCL's NVLS (``tree``: NVLS-Tree) chunk size for a buffer of ``size_bytes`` (bytes)."""
        c = self.chunk_bytes
        if tree and nodes >= 4:
            c = min(c, self.tree_max_chunk_bytes_4_nodes)
        ops = self.channels * heads
        for f, smaller in self.tree_chunk_rule if tree else self.chunk_rule:
            if size_bytes < f * ops * c and c > smaller:
                c = smaller
        return c


@dataclass(frozen=True)
class LLCaps:
    """NCCL's ``llMaxBws``: the LL protocol's bus bandwidth cap, bytes/s (``[bandwidth.ll_max_busbw_GBps]``)."""

    one_node: Mapping[str, float]
    """Per GPU architecture (``Hopper``...), groups inside one node."""
    two_nodes: float
    more_nodes: float


@dataclass(frozen=True)
class Tuning:
    """All constants of the cost model and of the chunking (SI units)."""

    base_latency_s: Mapping[str, Mapping[str, float]]
    """``[algo][protocol]`` -> s; algo in ``tree``, ``ring``."""
    hw_latency_s: Mapping[str, Mapping[str, Mapping[str, float]]]
    """``[link kind][algo][protocol]`` -> s per step."""
    wire_factor: Mapping[str, float]
    """``[protocol]`` -> wire bytes per payload byte."""
    ll_multinode_intra_latency_factor: float
    enabled_protocols: tuple[str, ...]
    bandwidth: Mapping[str, float]
    links: Mapping[str, LinkTuning]
    max_channels: int
    min_bytes_per_channel: int
    slice_bytes: int
    max_slices: int
    inflight_slices: int
    p2p_per_peer: int
    chain_slices_per_hop: int
    chain_min_slice_bytes: int
    max_flows_per_call: int
    chain_inflight_slices: int
    """At most this many slices in flight per connection of a tree (NCCL's ``NCCL_STEPS``;
    :meth:`~hetero_ns3.collectives.emit.Emitter.set_window_for_slices`). Rings and broadcast / reduce chains
    keep ``inflight_slices``."""
    reduction_bytes_touched: float
    hbm_efficiency: float
    default_hbm_bw_Bps: float
    source: str = ""
    nvls: NvlsTuning | None = None
    """NVLS constants; None when the tuning file has no ``[nvls]`` table (no NVLS algorithms)."""
    ll_max_busbw_Bps: LLCaps | None = None
    """LL bus bandwidth caps; None (no cap) when the tuning file has none."""
    net_overhead_s: Mapping[str, float] = field(default_factory=dict)
    """``[protocol]`` -> s: floor of the intra-node step latency of rings that span several nodes
    (NCCL v2.30.7's ``getNetOverhead``, x3 for Simple); empty = no floor."""
    launch_s: float = 0.0
    """Fixed cost of every collective call (kernel launch and start), s, on top of NCCL's latency model.
    NCCL's tuner leaves it out (it is the same for every algorithm and protocol, so it cannot change the
    choice); fitted on nccl-tests by ``scripts/fit_nccl_latency.py`` (``[latency] launch_us``, optional)."""
    inter_node_ring_channels: int = 0
    """0 (default): every call takes the ``max_channels`` / ``min_bytes_per_channel`` rule. N > 0: a call
    whose ranks are each on a node of their own (the inter-node rings of data parallelism) uses at most N
    channels, as NCCL does; NCCL's value is 2 for one NIC per rank (see ``select.default_channels``).
    Set from a scenario by ``[collectives] inter_node_ring_channels``."""

    def hw_latency(self, kind: str, algo: str, protocol: str) -> float:
        """Per-step latency (s) of ``algo``/``protocol`` over a ``kind`` link."""
        return self.hw_latency_s[kind][algo][protocol]


def _num(tbl: Mapping[str, Any], key: str, path: str, positive: bool = False) -> float:
    if key not in tbl:
        raise field_error(f"{path}.{key}", None, "is missing", "see collectives/tuning.toml for the keys")
    v = tbl[key]
    if not isinstance(v, int | float) or isinstance(v, bool) or v < 0 or (positive and v == 0):
        raise field_error(f"{path}.{key}", v, "must be a number >= 0" if not positive else "must be a number > 0")
    return float(v)


def _per_proto(tbl: Any, path: str, scale: float = 1.0) -> dict[str, float]:
    if not isinstance(tbl, Mapping):
        raise field_error(path, tbl, "must be a table {LL = .., LL128 = .., Simple = ..}")
    return {p: _num(tbl, p, path) * scale for p in PROTOCOLS}


def _table(data: Mapping[str, Any], key: str, path: str = "") -> Mapping[str, Any]:
    v = data.get(key)
    if not isinstance(v, Mapping):
        raise field_error(f"{path}{key}", v, "is missing or not a table", "see collectives/tuning.toml")
    return v


def tuning_from_dict(data: Mapping[str, Any], source: str = "") -> Tuning:
    """Validate a parsed tuning file (see ``collectives/tuning.toml``)."""
    us = 1e-6
    base = _table(data, "base_latency_us")
    base_s = {a: _per_proto(base.get(a), f"base_latency_us.{a}", us) for a in LAT_ALGOS}
    hw = _table(data, "hw_latency_us")
    hw_s = {
        k: {a: _per_proto(_table(hw, k, "hw_latency_us.").get(a), f"hw_latency_us.{k}.{a}", us) for a in LAT_ALGOS}
        for k in LINK_KINDS
    }
    proto = _table(data, "protocol")
    wire = _per_proto(proto.get("wire_factor"), "protocol.wire_factor")
    for p, factor in wire.items():
        if factor < 1.0:
            raise field_error(f"protocol.wire_factor.{p}", factor, "must be >= 1 (wire bytes per payload byte)")
    enabled = proto.get("enabled", list(PROTOCOLS))
    if not enabled or any(p not in PROTOCOLS for p in enabled):
        raise field_error("protocol.enabled", enabled, "must list protocols", f"choose from {list(PROTOCOLS)}")
    bw = _table(data, "bandwidth")
    bw_keys = (
        "ring_ll",
        "ring_ll_other",
        "ring_ll128",
        "ring_ll128_one_per_node",
        "tree",
        "tree_ll",
        "tree_ll128_single_node",
        "tree_ll128_multi_node",
    )
    bandwidth = {k: _num(bw, k, "bandwidth", positive=True) for k in bw_keys}
    links_tbl = _table(data, "links")
    links = {}
    for k in LINK_KINDS:
        t = _table(links_tbl, k, "links.")
        by_arch = t.get("wire_overhead_by_arch", {})
        if not isinstance(by_arch, Mapping):
            raise field_error(f"links.{k}.wire_overhead_by_arch", by_arch, "must be a table {Hopper = 1.21, ...}")
        per_arch = {str(a): _num(by_arch, a, f"links.{k}.wire_overhead_by_arch", positive=True) for a in by_arch}
        links[k] = LinkTuning(
            wire_overhead=_num(t, "wire_overhead", f"links.{k}", positive=True),
            efficiency=_num(t, "efficiency", f"links.{k}", positive=True),
            wire_overhead_by_arch=per_arch,
        )
        if links[k].wire_overhead < 1.0 or links[k].efficiency > 1.0:
            raise field_error(f"links.{k}", t, "needs wire_overhead >= 1 and 0 < efficiency <= 1")
        for arch, over in per_arch.items():
            if over < 1.0:
                raise field_error(
                    f"links.{k}.wire_overhead_by_arch.{arch}", over, "must be >= 1 (wire bytes per payload byte)"
                )
    ch = _table(data, "channels")
    red = _table(data, "reduction")
    ints = {}
    for key in (
        "max",
        "min_bytes_per_channel",
        "slice_bytes",
        "max_slices",
        "inflight_slices",
        "p2p_per_peer",
        "chain_slices_per_hop",
        "chain_min_slice_bytes",
        "max_flows_per_call",
    ):
        v = ch.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise field_error(f"channels.{key}", v, "must be an integer >= 1")
        ints[key] = v
    chain_window = ch.get("chain_inflight_slices", 8)  # optional: tuning files of earlier versions lack it
    if not isinstance(chain_window, int) or isinstance(chain_window, bool) or chain_window < 1:
        raise field_error("channels.chain_inflight_slices", chain_window, "must be an integer >= 1")
    if ints["max"] > 64:
        raise field_error("channels.max", ints["max"], "must be <= 64")
    return Tuning(
        base_latency_s=base_s,
        hw_latency_s=hw_s,
        wire_factor=wire,
        ll_multinode_intra_latency_factor=_num(proto, "ll_multinode_intra_latency_factor", "protocol", True),
        enabled_protocols=tuple(enabled),
        bandwidth=bandwidth,
        links=links,
        max_channels=ints["max"],
        min_bytes_per_channel=ints["min_bytes_per_channel"],
        slice_bytes=ints["slice_bytes"],
        max_slices=ints["max_slices"],
        inflight_slices=ints["inflight_slices"],
        p2p_per_peer=ints["p2p_per_peer"],
        chain_slices_per_hop=ints["chain_slices_per_hop"],
        chain_min_slice_bytes=ints["chain_min_slice_bytes"],
        max_flows_per_call=ints["max_flows_per_call"],
        chain_inflight_slices=chain_window,
        reduction_bytes_touched=_num(red, "bytes_touched_per_byte", "reduction", True),
        hbm_efficiency=_num(red, "hbm_efficiency", "reduction", True),
        default_hbm_bw_Bps=_num(red, "default_hbm_bw_Bps", "reduction", True),
        source=source,
        nvls=nvls_from_dict(_table(data, "nvls")) if "nvls" in data else None,
        ll_max_busbw_Bps=_ll_caps(bw["ll_max_busbw_GBps"]) if "ll_max_busbw_GBps" in bw else None,
        launch_s=_num(_table(data, "latency"), "launch_us", "latency") * us if "latency" in data else 0.0,
        net_overhead_s=_per_proto(_table(data, "latency").get("net_overhead_us"), "latency.net_overhead_us", us)
        if "net_overhead_us" in data.get("latency", {})
        else {},
    )


def _ll_caps(t: Any) -> LLCaps:
    path = "bandwidth.ll_max_busbw_GBps"
    if not isinstance(t, Mapping):
        raise field_error(
            path, t, "must be a table {one_node = {Hopper = 141.0, ...}, two_nodes = .., more_nodes = ..}"
        )
    one = t.get("one_node")
    if not isinstance(one, Mapping) or not one:
        raise field_error(f"{path}.one_node", one, "must be a table {Hopper = 141.0, ...} (GB/s per architecture)")
    return LLCaps(
        one_node={str(k): _num(one, k, f"{path}.one_node", positive=True) * 1e9 for k in one},
        two_nodes=_num(t, "two_nodes", path, positive=True) * 1e9,
        more_nodes=_num(t, "more_nodes", path, positive=True) * 1e9,
    )


def _rule(v: Any, path: str) -> tuple[tuple[int, int], ...]:
    ok = isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in p)
        for p in v
    )
    if not ok:
        raise field_error(path, v, "must be a list of [factor, chunk bytes] pairs of positive integers")
    return tuple((int(a), int(b)) for a, b in v)


def nvls_from_dict(t: Mapping[str, Any]) -> NvlsTuning:
    """Validate the ``[nvls]`` table of a tuning file."""
    eff = t.get("efficiency")
    if not isinstance(eff, Mapping) or not eff:
        raise field_error("nvls.efficiency", eff, "must be a table {Hopper = 0.85, ...}")
    effs = {str(k): _num(eff, k, "nvls.efficiency", positive=True) for k in eff}
    for k, e in effs.items():
        if e > 1.0:
            raise field_error(f"nvls.efficiency.{k}", e, "must be in (0, 1]")
    caps_t = t.get("tree_max_channel_GBps")
    if not isinstance(caps_t, Mapping):
        raise field_error("nvls.tree_max_channel_GBps", caps_t, "must be a table {Hopper = [n1, n2, n4], ...}")
    caps = {}
    for k, v in caps_t.items():
        if not (isinstance(v, list) and len(v) == 3 and all(isinstance(x, int | float) and x >= 0 for x in v)):
            raise field_error(f"nvls.tree_max_channel_GBps.{k}", v, "must be three numbers >= 0 (GB/s)")
        caps[str(k)] = (float(v[0]) * 1e9, float(v[1]) * 1e9, float(v[2]) * 1e9)
    ints = {}
    for key in ("channels", "chunk_bytes", "tree_max_chunk_bytes_4_nodes", "max_rounds", "max_heads"):
        v = t.get(key, NCCL_MAX_NVLS_ARITY if key == "max_heads" else None)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise field_error(f"nvls.{key}", v, "must be an integer >= 1")
        ints[key] = v
    return NvlsTuning(
        efficiency=effs,
        latency_s=_num(t, "latency_us", "nvls") * 1e-6,
        tree_net_latency_s=_num(t, "tree_net_latency_us", "nvls") * 1e-6,
        channels=ints["channels"],
        chunk_bytes=ints["chunk_bytes"],
        chunk_rule=_rule(t.get("chunk_rule"), "nvls.chunk_rule"),
        tree_chunk_rule=_rule(t.get("tree_chunk_rule"), "nvls.tree_chunk_rule"),
        tree_max_chunk_bytes_4_nodes=ints["tree_max_chunk_bytes_4_nodes"],
        tree_max_channel_Bps=caps,
        chunk_overhead_bytes=_num(t, "chunk_overhead_bytes", "nvls"),
        max_rounds=ints["max_rounds"],
        max_heads=ints["max_heads"],
    )


def default_tuning_path() -> Path:
    """``collectives/tuning.toml`` of the project home (see :mod:`hetero_ns3.paths`)."""
    p = preset_dir("collectives") / "tuning.toml"
    return p if p.is_file() else _REPO_FILE


@functools.lru_cache(maxsize=8)
def _load_cached(path: str) -> Tuning:
    data = read_toml(path, "tuning file")
    return tuning_from_dict(data, source=path)


def load_tuning(path: str | Path | None = None) -> Tuning:
    """Load and validate a tuning file (default: ``collectives/tuning.toml``); cached per path."""
    return _load_cached(str(Path(path) if path is not None else default_tuning_path()))
