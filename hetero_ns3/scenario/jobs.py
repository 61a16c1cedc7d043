"""The ``[[jobs]]`` section: several training jobs sharing one ``[cluster]`` and one ``[network]``.

Each job has its own model, parallel plan, placement on the cluster's nodes, start offset and iteration
count. A scenario with jobs has no top-level ``[model]`` / ``[parallelism]``. See docs/multijob.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.scenario.fields import load_dataclass
from hetero_ns3.workload.models import ModelSpec, load_model_section
from hetero_ns3.workload.parallel import ParallelismSpec

PLACEMENT_POLICIES = ("packed", "spread", "random")


@dataclass(frozen=True)
class PlacementSection:
    """Which nodes of the cluster a job runs on (whole nodes; the job's GPUs fill them in order).

    Attributes:
        policy: ``packed``: the lowest-numbered free nodes (neighbours: same leaf / pod where the topology
            numbers nodes that way); ``spread``: free nodes taken evenly across the node range (one job per
            leaf in turn, the placement that sends its traffic across spines); ``random``: free nodes drawn
            with ``seed``.
        nodes: explicit node indices (then ``policy`` is not used); jobs may not share a node.
        seed: seed of the ``random`` policy.
    """

    policy: Literal["packed", "spread", "random"] = "packed"
    nodes: tuple[int, ...] = ()
    seed: int = 1

    def validate(self, where: str) -> None:
        if len(set(self.nodes)) != len(self.nodes):
            raise field_error(f"{where}.nodes", list(self.nodes), "names a node twice", "list each node once")
        if any(n < 0 for n in self.nodes):
            raise field_error(f"{where}.nodes", list(self.nodes), "must be node indices >= 0")


@dataclass(frozen=True)
class _JobFields:
    """The scalar fields of one ``[[jobs]]`` table (model, parallelism, placement load separately)."""

    name: str = ""
    start: float = dataclasses.field(default=0.0, metadata={"unit": "time"})
    """Simulated time at which the job's first iteration starts (s)."""
    iterations: int = 1
    """Training iterations of this job, back to back."""


@dataclass(frozen=True)
class JobSection:
    """One training job of a multi-job scenario."""

    name: str
    model: ModelSpec
    parallelism: ParallelismSpec
    placement: PlacementSection = PlacementSection()
    start: float = 0.0
    iterations: int = 1

    @property
    def n_gpus(self) -> int:
        """GPUs the job needs: tp x pp x dp."""
        p = self.parallelism
        return p.tp * p.pp * p.dp


def load_jobs_section(value: Any, where: str = "jobs") -> tuple[JobSection, ...]:
    """``[[jobs]]`` (an array of tables) -> JobSections; errors name ``jobs[i].field``."""
    if isinstance(value, Mapping) or not isinstance(value, Sequence) or isinstance(value, str):
        raise ScenarioError(f"{where} must be an array of tables: write each job as [[{where}]]")
    if not value:
        raise ScenarioError(f"{where} is empty: give at least one [[{where}]] table, or leave the section out")
    out: list[JobSection] = []
    for i, table in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(table, Mapping):
            raise field_error(w, table, "must be a table")
        for key in ("model", "parallelism"):
            if key not in table:
                raise ScenarioError(f"{w}.{key} is missing; every job has its own model and parallelism")
        rest = {k: v for k, v in table.items() if k not in ("model", "parallelism", "placement")}
        fields = load_dataclass(_JobFields, rest, w)
        model = load_model_section(table["model"], f"{w}.model")
        plan = load_dataclass(ParallelismSpec, table["parallelism"], f"{w}.parallelism")
        if plan.dp < 1:
            raise field_error(
                f"{w}.parallelism.dp",
                plan.dp,
                "must be set for a job",
                "a job's size (tp x pp x dp) decides its placement",
            )
        placement = load_dataclass(PlacementSection, table.get("placement", {}), f"{w}.placement")
        if fields.iterations < 1:
            raise field_error(f"{w}.iterations", fields.iterations, "must be >= 1")
        if fields.start < 0:
            raise field_error(f"{w}.start", fields.start, "must be >= 0 s")
        out.append(JobSection(fields.name or f"job{i}", model, plan, placement, float(fields.start), fields.iterations))
    names = [j.name for j in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise field_error(f"{where}[*].name", dup, "is used by two jobs", "give each job its own name")
    return tuple(out)
