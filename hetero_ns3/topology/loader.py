"""Load and validate a cluster description (``topologies/*.toml``) into a :class:`ClusterSpec`.

Every error names the dotted field path (``groups[1].nics.affinity``), the value and the fix.
The file format is documented in ``docs/topologies.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.inputs import did_you_mean, read_toml
from hetero_ns3.paths import resolve_preset
from hetero_ns3.topology import catalog
from hetero_ns3.topology.fabric import check_nic_attach
from hetero_ns3.topology.graph import ROUTING_KINDS
from hetero_ns3.topology.spec import (
    FABRIC_KINDS,
    FATTREE,
    LEAFSPINE,
    MESH,
    NETWORK_KINDS,
    NIC_ATTACH_AUTO,
    NIC_ATTACH_KINDS,
    NVLINK_BRIDGE,
    NVSWITCH,
    PCIE,
    RAIL,
    ClusterSpec,
    FabricSpec,
    NetworkSpec,
    NicSpec,
    NodeGroup,
    PcieSwitchSpec,
    TierSpec,
)
from hetero_ns3.units import parse_rate, parse_size, parse_time

PCIE_GT_PER_S = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""Per-lane transfer rate of each PCIe generation, GT/s (PCI-SIG base specifications 3.0-6.0)."""

TIER_NAMES = {RAIL: ("rail", "spine"), LEAFSPINE: ("leaf", "spine"), FATTREE: ("edge", "agg", "core")}

MAX_GPUS_PER_NODE = 1024
"""Largest scale-up domain a cluster file may describe (the largest announced NVLink domain has 576 GPUs)."""
MAX_CLUSTER_GPUS = 65_536
"""Largest cluster a file may describe, GPUs over all groups (as many as the inline ``star:N`` hosts)."""


PCIE_FLIT_TLP_FRACTION = 236.0 / 256.0
"""Gen6 (FLIT mode): of each 256-byte flit, 236 bytes carry TLPs; the rest are link-layer payload (6), CRC (8) and
FEC (6) bytes (PCI-SIG base specification 6.0; 118 GB/s per direction on x16)."""


def pcie_rate_bps(gen: int, lanes: int) -> float:
    """Usable PCIe bit rate per direction: GT/s x lanes x the line code's payload fraction.

    Gen3-5: 128/130 (TLP headers and DLLPs not subtracted: the collective planner's ``[links.pcie] wire_overhead``
    adds them). Gen6: the TLP bytes of a flit, :data:`PCIE_FLIT_TLP_FRACTION`.
    """
    fraction = PCIE_FLIT_TLP_FRACTION if gen >= 6 else 128.0 / 130.0
    return PCIE_GT_PER_S[gen] * 1e9 * lanes * fraction


def _keys(table: dict[str, Any], path: str, allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise field_error(
            f"{path}.{extra[0]}",
            table[extra[0]],
            "is not a known field",
            f"{did_you_mean(extra[0], allowed).lstrip('; ')} use one of {sorted(allowed)}".lstrip(),
        )


def _table(parent: dict[str, Any], key: str, path: str, required: bool = True) -> dict[str, Any]:
    v = parent.get(key)
    if v is None:
        if required:
            raise field_error(f"{path}.{key}" if path else key, None, "is missing", "add the table")
        return {}
    if not isinstance(v, dict):
        raise field_error(f"{path}.{key}" if path else key, v, "must be a table")
    return v


def _int(table: dict[str, Any], key: str, path: str, default: int | None = None, minimum: int = 1) -> int:
    v = table.get(key, default)
    p = f"{path}.{key}"
    if v is None:
        raise field_error(p, None, "is missing", f"give an integer >= {minimum}")
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise field_error(p, v, f"must be an integer >= {minimum}")
    return v


def _explicit_count(table: dict[str, Any], key: str, path: str, meaning: str) -> int:
    """A count whose 0 means "derive it": written in a file it must be >= 1 (leave it out for the default)."""
    if key not in table:
        return 0
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise field_error(f"{path}.{key}", v, "must be an integer >= 1", f"leave it out to use the default ({meaning})")
    return v


def _float(table: dict[str, Any], key: str, path: str, default: float, minimum: float) -> float:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < minimum:
        raise field_error(f"{path}.{key}", v, f"must be a number >= {minimum}")
    return float(v)


def _str(table: dict[str, Any], key: str, path: str, choices: tuple[str, ...], default: str | None = None) -> str:
    v = table.get(key, default)
    if v not in choices:
        raise field_error(f"{path}.{key}", v, "is not a valid choice", f"use one of {list(choices)}")
    return str(v)


def _rate(table: dict[str, Any], key: str, path: str, default: Any = None) -> float:
    v = table.get(key, default)
    if v is None:
        raise field_error(f"{path}.{key}", None, "is missing", "give a rate such as '400Gbps'")
    return parse_rate(v, f"{path}.{key}")


def _index_list(v: Any, path: str, limit: int, what: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise field_error(path, v, f"must be a list of {what} indices")
    for x in v:
        if not 0 <= x < limit:
            raise field_error(path, v, f"holds {what} index {x} outside 0..{limit - 1}")
    return tuple(v)


def _nics(t: dict[str, Any], path: str, gpus: int) -> NicSpec:
    _keys(t, path, {"count", "rate", "affinity"})
    count = _int(t, "count", path)
    rate = _rate(t, "rate", path)
    if "affinity" in t:
        raw = t["affinity"]
        if not isinstance(raw, list) or len(raw) != count:
            n = len(raw) if isinstance(raw, list) else "no"
            raise field_error(
                f"{path}.affinity", raw, f"has {n} entries but {path}.count is {count}", "give one GPU list per NIC"
            )
        aff = tuple(_index_list(a, f"{path}.affinity[{j}]", gpus, "GPU") for j, a in enumerate(raw))
    else:
        if gpus % count:
            raise field_error(
                f"{path}.count", count, f"does not divide gpus_per_node ({gpus})", f"give {path}.affinity explicitly"
            )
        per = gpus // count
        aff = tuple(tuple(range(j * per, (j + 1) * per)) for j in range(count))
    seen = sorted(x for a in aff for x in a)
    if seen != list(range(gpus)):
        raise field_error(
            f"{path}.affinity", [list(a) for a in aff], f"must list each GPU 0..{gpus - 1} exactly once over the NICs"
        )
    return NicSpec(count, rate, aff)


_SCALE_UP_RATES = {
    NVSWITCH: (catalog.nvlink_rate_bps, "NVLink", "give the per-GPU rate per direction, e.g. nvlink_rate = '450GBps'"),
    NVLINK_BRIDGE: (
        catalog.nvlink_bridge_rate_bps,
        "NVLink bridge",
        "give the bridge rate per direction, e.g. nvlink_rate = '300GBps'",
    ),
    MESH: (
        catalog.mesh_link_rate_bps,
        "GPU-to-GPU mesh links",
        "give the rate of one link per direction, e.g. nvlink_rate = '64GBps'",
    ),
}
"""Per scale-up fabric kind: the catalog rate that ``nvlink_rate`` defaults to, what it is, the fix."""


def _scale_up_rate(t: dict[str, Any], path: str, kind: str, gpu_type: str) -> float:
    """``nvlink_rate`` of a scale-up fabric (bit/s each way): given, else the GPU catalog's, else an error."""
    rate_of, what, fix = _SCALE_UP_RATES[kind]
    default = rate_of(gpu_type)
    if "nvlink_rate" not in t and default <= 0:
        raise field_error(f"{path}.nvlink_rate", None, f"is missing and {gpu_type} has no {what} in the catalog", fix)
    return _rate(t, "nvlink_rate", path, default)


def _fabric(t: dict[str, Any], path: str, gpu_type: str, gpus: int, nics: NicSpec) -> FabricSpec:
    allowed = {"kind", "nvlink_rate", "nvlink_delay", "nvlink_segment", "pcie_gen", "pcie_lanes", "pcie_rate", "nvls"}
    _keys(t, path, allowed | {"pcie_delay", "pcie_switches", "nic_attach"})
    kind = _str(t, "kind", path, FABRIC_KINDS)
    gen = _int(t, "pcie_gen", path, 4 if kind == PCIE else 5, minimum=3)
    if gen not in PCIE_GT_PER_S:
        raise field_error(f"{path}.pcie_gen", gen, "is not a PCIe generation", f"use one of {sorted(PCIE_GT_PER_S)}")
    lanes = _int(t, "pcie_lanes", path, 16)
    pcie_rate = _rate(t, "pcie_rate", path, pcie_rate_bps(gen, lanes))
    if kind == NVLINK_BRIDGE and gpus % 2:
        raise field_error(
            f"{path}.kind", kind, f"joins GPUs in pairs but gpus_per_node is {gpus}", "use an even gpus_per_node"
        )
    if kind in _SCALE_UP_RATES:
        nvlink = _scale_up_rate(t, path, kind, gpu_type)
    else:
        if "nvlink_rate" in t:
            raise field_error(
                f"{path}.nvlink_rate",
                t["nvlink_rate"],
                "applies only to kind = 'nvswitch', 'nvlink_bridge' or 'mesh'",
            )
        nvlink = 0.0
    nv_delay = parse_time(t.get("nvlink_delay", "100ns"), f"{path}.nvlink_delay")
    pcie_delay = parse_time(t.get("pcie_delay", "100ns"), f"{path}.pcie_delay")
    seg = parse_size(t.get("nvlink_segment", 0), f"{path}.nvlink_segment", allow_zero=True)
    if "pcie_switches" in t:
        raw = t["pcie_switches"]
        if not isinstance(raw, list) or not raw:
            raise field_error(f"{path}.pcie_switches", raw, "must be a non-empty list of {gpus = [..], nics = [..]}")
        sw = []
        for i, s in enumerate(raw):
            sp = f"{path}.pcie_switches[{i}]"
            if not isinstance(s, dict):
                raise field_error(sp, s, "must be a table {gpus = [..], nics = [..]}")
            _keys(s, sp, {"gpus", "nics"})
            sw.append(
                PcieSwitchSpec(
                    _index_list(s.get("gpus", []), f"{sp}.gpus", gpus, "GPU"),
                    _index_list(s.get("nics", []), f"{sp}.nics", nics.count, "NIC"),
                )
            )
        switches = tuple(sw)
    else:
        switches = tuple(PcieSwitchSpec(a, (j,)) for j, a in enumerate(nics.affinity))
    for what, limit, sel in (("GPU", gpus, lambda s: s.gpus), ("NIC", nics.count, lambda s: s.nics)):
        got = sorted(x for s in switches for x in sel(s))
        if got != list(range(limit)):
            raise field_error(
                f"{path}.pcie_switches", raw if "pcie_switches" in t else None, f"must hold each {what} exactly once"
            )
    where = {x: i for i, s in enumerate(switches) for x in s.gpus}
    for j, a in enumerate(nics.affinity):
        nic_sw = next(i for i, s in enumerate(switches) if j in s.nics)
        for gpu in a:
            if where[gpu] != nic_sw:
                raise field_error(
                    f"{path}.pcie_switches",
                    t.get("pcie_switches"),
                    f"puts GPU {gpu} on another PCIe switch than its affinity NIC {j}",
                    "put each NIC with the GPUs it serves",
                )
    nvls = t.get("nvls", kind == NVSWITCH and catalog.nvls_capable(gpu_type))
    if not isinstance(nvls, bool):
        raise field_error(f"{path}.nvls", nvls, "must be true or false")
    if nvls and kind != NVSWITCH:
        raise field_error(
            f"{path}.nvls", nvls, "applies only to kind = 'nvswitch'", "remove it or use an NVSwitch fabric"
        )
    attach = _str(t, "nic_attach", path, NIC_ATTACH_KINDS, NIC_ATTACH_AUTO)
    return FabricSpec(kind, nvlink, nv_delay, gen, lanes, pcie_rate, pcie_delay, switches, seg, nvls, attach)


def _group(t: Any, path: str) -> NodeGroup:
    if not isinstance(t, dict):
        raise field_error(path, t, "must be a table")
    _keys(t, path, {"name", "count", "gpu", "gpus_per_node", "fabric", "nics"})
    name = t.get("name")
    if not isinstance(name, str) or not name:
        raise field_error(f"{path}.name", name, "must be a non-empty string")
    count = _int(t, "count", path)
    gpu_type = catalog.check_gpu(t.get("gpu"), f"{path}.gpu")
    gpus = _int(t, "gpus_per_node", path, 8)
    if gpus > MAX_GPUS_PER_NODE:
        raise field_error(
            f"{path}.gpus_per_node", gpus, f"must be at most {MAX_GPUS_PER_NODE}", "describe a smaller node"
        )
    if count * gpus > MAX_CLUSTER_GPUS:
        raise field_error(
            f"{path}.count", count, f"x gpus_per_node ({gpus}) exceeds {MAX_CLUSTER_GPUS} GPUs", "use fewer nodes"
        )
    nics = _nics(_table(t, "nics", path), f"{path}.nics", gpus)
    fabric = _fabric(_table(t, "fabric", path), f"{path}.fabric", gpu_type, gpus, nics)
    group = NodeGroup(name, count, gpu_type, gpus, fabric, nics)
    check_nic_attach(group, f"{path}.fabric.nic_attach")
    return group


def _network(t: dict[str, Any], path: str, groups: tuple[NodeGroup, ...]) -> NetworkSpec:
    kind = _str(t, "kind", path, NETWORK_KINDS)
    tier_names = TIER_NAMES[kind]
    scalar = {"kind", "access_delay", "rails", "nodes_per_pod", "spines", "ports_per_leaf", "k", "routing"}
    _keys(t, path, scalar | set(tier_names))
    tiers = {}
    for name in tier_names:
        tp = f"{path}.{name}"
        tt = _table(t, name, path, required=False)
        _keys(tt, tp, {"uplink_rate", "uplink_delay", "buffer", "oversubscription", "uplinks"})
        tiers[name] = TierSpec(
            uplink_rate_bps=parse_rate(tt["uplink_rate"], f"{tp}.uplink_rate") if "uplink_rate" in tt else 0.0,
            uplink_delay_s=parse_time(tt.get("uplink_delay", "1us"), f"{tp}.uplink_delay"),
            buffer_bytes=parse_size(tt.get("buffer", 0), f"{tp}.buffer", allow_zero=True),
            oversubscription=_float(tt, "oversubscription", tp, 1.0, 1.0),
            uplinks=_explicit_count(tt, "uplinks", tp, "from the uplink rate and oversubscription"),
        )
        if "uplinks" in tt and "oversubscription" in tt:
            raise field_error(f"{tp}.uplinks", tt["uplinks"], "and oversubscription exclude each other", "give one")
    net = NetworkSpec(
        kind=kind,
        access_delay_s=parse_time(t.get("access_delay", "1us"), f"{path}.access_delay"),
        tiers=tiers,
        rails=_explicit_count(t, "rails", path, "the largest NIC count per node"),
        nodes_per_pod=_int(t, "nodes_per_pod", path, 0, minimum=0),
        spines=_explicit_count(t, "spines", path, "as many as uplinks per lower switch"),
        ports_per_leaf=_int(t, "ports_per_leaf", path, 0 if kind != LEAFSPINE else None, minimum=0),
        k=_int(t, "k", path, 0 if kind != FATTREE else None, minimum=0),
        routing=_str(t, "routing", path, ROUTING_KINDS, "ecmp"),
    )
    if kind == LEAFSPINE and net.ports_per_leaf < 1:
        raise field_error(f"{path}.ports_per_leaf", net.ports_per_leaf, "must be >= 1")
    if kind == FATTREE and (net.k < 2 or net.k % 2):
        raise field_error(f"{path}.k", net.k, "must be an even integer >= 2")
    if kind == RAIL:
        rails = net.rails or max(g.nics.count for g in groups)
        for i, g in enumerate(groups):
            if g.nics.count > rails or rails % g.nics.count:
                raise field_error(
                    f"groups[{i}].nics.count",
                    g.nics.count,
                    f"must divide {path}.rails ({rails}) so that each NIC gets its own rail",
                )
    return net


def parse_cluster(data: dict[str, Any], source: str = "<cluster>") -> ClusterSpec:
    """Validate a cluster description already read from TOML (``source`` names it in errors)."""
    _keys(data, "cluster", {"name", "description", "groups", "network"})
    raw_groups = data.get("groups")
    if not isinstance(raw_groups, list) or not raw_groups:
        raise field_error("groups", raw_groups, f"must be a non-empty array of tables in {source}", "add [[groups]]")
    groups = tuple(_group(g, f"groups[{i}]") for i, g in enumerate(raw_groups))
    total = sum(g.count * g.gpus_per_node for g in groups)
    if total > MAX_CLUSTER_GPUS:
        raise field_error("groups", total, f"GPUs in all exceed {MAX_CLUSTER_GPUS}", "use fewer or smaller groups")
    names = [g.name for g in groups]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise field_error(f"groups[{i}].name", n, "is used twice", "give each group its own name")
    network = _network(_table(data, "network", ""), "network", groups)
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str):
        raise field_error("name", name, "must be a string")
    desc = data.get("description", "")
    return ClusterSpec(name=name, groups=groups, network=network, description=str(desc))


def load_cluster(ref: str | Path) -> ClusterSpec:
    """Load a cluster: a preset name in ``topologies/`` (e.g. ``h2``) or a path to a TOML file."""
    path = resolve_preset(ref, "topologies")
    data = read_toml(path, "topology file")
    try:
        return parse_cluster(data, str(path))
    except ScenarioError as err:
        raise ScenarioError(f"{path.name}: {err}") from None
