"""The ``[run]`` section: backend, seed, stall limit, iterations."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hetero_ns3.errors import field_error


@dataclass(frozen=True)
class RunSection:
    """How to run the scenario."""

    backend: str = "ns3"
    """``ns3``: packet level (the native RoCE module); ``analytic``: flow level (max-min fair sharing)."""
    seed: int = 1
    """Seed of every random choice (ECMP hashing, ECN marking); same seed, same results."""
    stall_limit: float = dataclasses.field(default=60.0, metadata={"unit": "time"})
    """Packet level: stop (and report a failed run) after this much simulated time without progress."""
    iterations: int = 1
    """Training iterations to simulate back to back (>= 1). With N >= 2 the reported iteration time
    and breakdown are the mean over iterations 2..N (steady state); see docs/cosim.md."""

    job_baselines: bool = False
    """Multi-job scenarios (``[[jobs]]``): also simulate each job alone on the same placement and report its
    slowdown (shared iteration time / alone iteration time)."""

    reuse_isolated_collectives: str = "auto"
    """``on``: lower every call of a rank group whose links no other traffic uses (e.g. a TP group on its
    node's NVSwitch, checked from the routes) into one task per rank, timed by the same backend running
    that call alone (memoised); ``off``: every call in detail (every NVLink flow in ``flows.csv``);
    ``auto`` (default): ``on`` on the flow-level backend, where the result is the same, for a compiled
    workload without link faults or ``[[jobs]]``; ``off`` otherwise. Much less memory and time for
    TP-heavy plans; see docs/collectives.md, "Isolated-collective reuse", for when it is exact."""

    tables: tuple[str, ...] = ("csv", "parquet")
    """Formats of the run directory's tables (``tasks``, ``flows``, multi-job ``links``): ``csv``, ``parquet``
    or both (default). The CSV files are about 13 times the Parquet ones (a 16-GPU MoE step: 520 against
    38 MB of tasks); a sweep of large points can write ``["parquet"]`` alone (docs/results.md)."""
    trace: bool = True
    """Write ``trace.json`` (Chrome trace / Perfetto, at most 1 M events: up to ~180 MB)."""

    def validate(self, where: str = "run") -> None:
        from hetero_ns3.network.backend import backend_names
        from hetero_ns3.plan.fuse import check_reuse_mode

        check_reuse_mode(self.reuse_isolated_collectives, f"{where}.reuse_isolated_collectives")

        from hetero_ns3.results.rundir import TABLE_FORMATS, check_table_formats

        try:
            check_table_formats(self.tables)
        except ValueError:
            raise field_error(
                f"{where}.tables",
                list(self.tables),
                f"must name one or more of {list(TABLE_FORMATS)}, each once",
                'e.g. run.tables = ["parquet"]',
            ) from None
        if self.backend not in backend_names():
            raise field_error(
                f"{where}.backend", self.backend, "is not a backend", f"use one of {list(backend_names())}"
            )
        if self.iterations < 1:
            raise field_error(
                f"{where}.iterations", self.iterations, "must be an integer >= 1", "e.g. --set run.iterations=3"
            )
        if not 1 <= self.seed < 2**32:
            raise field_error(f"{where}.seed", self.seed, "must be an integer in [1, 2**32)")
        if not self.stall_limit > 0:
            raise field_error(f"{where}.stall_limit", self.stall_limit, "must be a positive time", "e.g. '60s'")
