"""User-defined algorithm schedules: TOML files in ``collectives/schedules/`` (format in docs/collectives.md).

A schedule file describes one algorithm without Python::

    [schedule]
    name = "ring_interleaved_8"      # the --algo value; must not clash with a built-in
    kind = "ring"                    # schedule kinds: "ring"
    ranks = 8                        # group size it is written for
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]
    rings = [[0, 2, 4, 6, 7, 5, 3, 1], [0, 1, 2, 3, 4, 5, 6, 7]]   # per channel; cycled
    description = "free text"

Each ring is a permutation of the rank indices ``0..ranks-1``; channel ``c`` uses ``rings[c % len]``.
The planner then splits, slices and pipelines exactly as for the built-in ring.
"""

from __future__ import annotations

from pathlib import Path

from hetero_ns3.collectives.emit import Emitter
from hetero_ns3.collectives.env import CollectiveEnv
from hetero_ns3.collectives.types import CollectiveCall, normalize_op
from hetero_ns3.errors import field_error
from hetero_ns3.inputs import read_toml
from hetero_ns3.paths import preset_dir

SCHEDULE_KINDS = ("ring",)
_REPO_DIR = Path(__file__).resolve().parents[2] / "collectives" / "schedules"


def default_schedule_dir() -> Path:
    d = preset_dir("collectives") / "schedules"
    return d if d.is_dir() else _REPO_DIR


class CustomRing:
    """A ring algorithm with user-given ring orders (one per channel, cycled)."""

    family = "ring"
    auto = False

    def __init__(self, name: str, ranks: int, ops: frozenset[str], rings: list[list[int]], source: str = "") -> None:
        self.name = name
        self.ranks = ranks
        self.ops = ops
        self.rings = rings
        self.source = source
        self.description = ""

    def check(self, call: CollectiveCall, env: CollectiveEnv) -> str | None:
        if call.op not in self.ops:
            return f"schedule {self.name!r} implements {sorted(self.ops)}"
        if len(call.group) != self.ranks:
            return f"schedule {self.name!r} is written for {self.ranks} ranks, the group has {len(call.group)}"
        return None

    def cost(self, call: CollectiveCall, env: CollectiveEnv, protocol: str, channels: int):
        from hetero_ns3.collectives.algorithms.ring import ring_cost

        return ring_cost(env, call, protocol, channels, self.rings, call.size_bytes)

    def plan(self, em: Emitter) -> None:
        from hetero_ns3.collectives.algorithms.ring import emit_ring

        call = em.call
        ready0 = {g: em.entry(g) for g in call.group}
        emit_ring(em, call.group, self.rings, call.op, call.size_bytes, ready0, em.channels, call.root)


def schedule_from_dict(data: dict, source: str = "") -> CustomRing:
    """Validate one parsed schedule file."""
    sch = data.get("schedule")
    where = f"{source}: schedule" if source else "schedule"
    if not isinstance(sch, dict):
        raise field_error(where, sch, "is missing", "start the file with a [schedule] table")
    name = sch.get("name")
    if not isinstance(name, str) or not name.strip():
        raise field_error(f"{where}.name", name, "must be a non-empty string")
    kind = sch.get("kind", "ring")
    if kind not in SCHEDULE_KINDS:
        raise field_error(f"{where}.kind", kind, "is not a schedule kind", f"use one of {list(SCHEDULE_KINDS)}")
    ranks = sch.get("ranks")
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 2:
        raise field_error(f"{where}.ranks", ranks, "must be an integer >= 2")
    ops_raw = sch.get("ops", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
    if not isinstance(ops_raw, list) or not ops_raw:
        raise field_error(f"{where}.ops", ops_raw, "must be a list of collectives")
    ops = frozenset(normalize_op(str(o), f"{where}.ops[{i}]") for i, o in enumerate(ops_raw))
    ring_ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"}
    if not ops <= ring_ops:
        raise field_error(f"{where}.ops", sorted(ops), "includes ops a ring cannot run", f"use {sorted(ring_ops)}")
    rings = sch.get("rings")
    if not isinstance(rings, list) or not rings:
        raise field_error(f"{where}.rings", rings, "must be a non-empty list of rank orders")
    for i, r in enumerate(rings):
        if not isinstance(r, list) or sorted(r) != list(range(ranks)):
            raise field_error(f"{where}.rings[{i}]", r, f"is not a permutation of 0..{ranks - 1}")
    algo = CustomRing(name.strip(), ranks, ops, [list(r) for r in rings], source)
    algo.description = str(sch.get("description", ""))
    return algo


def load_schedule_file(path: str | Path) -> CustomRing:
    """Parse and validate one schedule file."""
    p = Path(path)
    data = read_toml(p, "schedule file")
    return schedule_from_dict(data, str(p))
