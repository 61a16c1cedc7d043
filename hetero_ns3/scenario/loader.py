"""Scenario files: TOML -> :class:`Scenario`, one frozen, typed dataclass whose fields are the sections.

``load_scenario(path, overrides)`` reads the file, applies ``--set`` overrides and loads each table into
its section's dataclass; sections a file leaves out take their defaults (``model``, ``parallelism`` and
``cluster`` have none: :meth:`Scenario.require` names what is missing). Errors name the dotted field path
(``parallelism.tp``), the value and the fix. The set of sections is :data:`SECTIONS`: adding a section is
one field of :class:`Scenario` plus one entry there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetero_ns3.compute.config import ComputeConfig
from hetero_ns3.errors import ScenarioError
from hetero_ns3.inputs import did_you_mean, read_toml
from hetero_ns3.network.config import NetworkConfig
from hetero_ns3.scenario.cluster import ClusterSection
from hetero_ns3.scenario.collectives import CollectivesSection
from hetero_ns3.scenario.faults import FaultsSection
from hetero_ns3.scenario.fields import load_dataclass, to_plain
from hetero_ns3.scenario.jobs import JobSection, load_jobs_section
from hetero_ns3.scenario.network import load_network_section
from hetero_ns3.scenario.overrides import apply_overrides
from hetero_ns3.scenario.run import RunSection
from hetero_ns3.scenario.workload import WorkloadSection
from hetero_ns3.workload.models import ModelSpec, load_model_section
from hetero_ns3.workload.parallel import ParallelismSpec


@dataclass(frozen=True)
class SectionSpec:
    """How one ``[name]`` table loads: its dataclass, an optional custom loader, a line for error messages."""

    cls: type
    doc: str
    loader: Callable[[Any, str], Any] | None = None
    array: bool = False
    """The section is an array of tables (``[[jobs]]``), not one table."""

    def load(self, table: Mapping[str, Any], where: str) -> Any:
        return self.loader(table, where) if self.loader else load_dataclass(self.cls, table, where)


#: Every scenario section, in file order. Keys are the TOML table names and the :class:`Scenario` fields.
SECTIONS: Mapping[str, SectionSpec] = {
    "model": SectionSpec(ModelSpec, "the model: a catalog name or a full shape", load_model_section),
    "parallelism": SectionSpec(ParallelismSpec, "the parallel plan (tp, pp, dp, schedule, ...)"),
    "cluster": SectionSpec(ClusterSection, "topology = 'h0' (preset or path) or inline [[cluster.groups]]"),
    "compute": SectionSpec(ComputeConfig, "precision, efficiency table, memory allowance"),
    "network": SectionSpec(NetworkConfig, "congestion control, PFC, ECN, buffers, NIC", load_network_section),
    "collectives": SectionSpec(CollectivesSection, "[collectives.tp|pp|dp|ep] algo / protocol / channels"),
    "faults": SectionSpec(FaultsSection, "[[faults.gpus]] slowdowns and [[faults.links]] degraded links"),
    "run": SectionSpec(RunSection, "backend (ns3 | analytic), seed, stall_limit, iterations"),
    "jobs": SectionSpec(JobSection, "[[jobs]]: several training jobs on one cluster", load_jobs_section, array=True),
    "workload": SectionSpec(WorkloadSection, "chakra = 'DIR_or_glob' of per-rank Chakra ET files (docs/chakra.md)"),
}


@dataclass(frozen=True)
class Scenario:
    """A loaded, validated scenario: one attribute per section.

    Attributes:
        source: file the scenario came from (``"<dict>"`` when built from a mapping).
        base_dir: directory against which relative paths inside the scenario resolve.
        model, parallelism, cluster: the workload sections; ``None`` when the file has none
            (a collective or flow study needs none of them; :meth:`require` raises a clear error).
        compute, network, collectives, faults, run: the other sections, defaults when absent.
        jobs: several training jobs sharing the cluster (``[[jobs]]``; then no top-level model/parallelism).
        workload: an external workload (``[workload] chakra = ...``: a Chakra trace instead of a model).
        overrides: the ``--set`` strings applied, in order.
        present: names of the sections written in the file (or set by an override).
    """

    source: str
    base_dir: Path
    model: ModelSpec | None = None
    parallelism: ParallelismSpec | None = None
    cluster: ClusterSection | None = None
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    collectives: CollectivesSection = field(default_factory=CollectivesSection)
    faults: FaultsSection = field(default_factory=FaultsSection)
    run: RunSection = field(default_factory=RunSection)
    jobs: tuple[JobSection, ...] = ()
    workload: WorkloadSection | None = None
    overrides: tuple[str, ...] = ()
    present: frozenset[str] = frozenset()

    def require(self, *names: str, purpose: str = "this command") -> None:
        """Raise :class:`ScenarioError` naming the first of ``names`` that the file lacks."""
        for name in names:
            if getattr(self, name) is None:
                raise ScenarioError(
                    f"[{name}] section is missing from {self.source}; {purpose} needs {', '.join(names)} "
                    f"({SECTIONS[name].doc})"
                )

    def resolved(self) -> dict[str, Any]:
        """Plain-dict form of every section with defaults filled in (for ``scenario.resolved.json``)."""
        out: dict[str, Any] = {"source": self.source, "overrides": list(self.overrides)}
        for name in SECTIONS:
            value = getattr(self, name)
            if value is not None and value != ():
                out[name] = to_plain(value)
        return out


#: Top-level tables of a study file (docs/studies.md): a scenario command given one says to use ``sweep``.
_STUDY_TABLES = frozenset({"study", "base", "axes", "zip", "exclude", "rules"})


def scenario_from_dict(
    raw: Mapping[str, Any], overrides: Iterable[str] = (), source: str = "<dict>", base_dir: Path | None = None
) -> Scenario:
    """Load a scenario from an already-parsed TOML mapping (see :func:`load_scenario`)."""
    ov = tuple(overrides)
    data = apply_overrides(raw, ov)
    sections: dict[str, Any] = {}
    for name, table in data.items():
        spec = SECTIONS.get(name)
        if spec is None:
            study = "; this is a study file: run it with hetero-ns3 sweep" if name in _STUDY_TABLES else ""
            raise ScenarioError(
                f"[{name}] is not a known scenario section{did_you_mean(name, SECTIONS) or ';'} "
                f"valid sections: {sorted(SECTIONS)}{study}"
            )
        if not spec.array and not isinstance(table, Mapping):
            raise ScenarioError(f"{name} ({table!r}) must be a table: write it as [{name}] with keys below it")
        sections[name] = spec.load(table, name)
    if "jobs" in sections:
        clash: list[str] = [k for k in ("model", "parallelism") if k in sections]
        if clash:
            raise ScenarioError(
                f"[{clash[0]}] and [[jobs]] are both in {source}: with jobs, each job has its own model and "
                f"parallelism; move [{clash[0]}] into the jobs (jobs[0].{clash[0]})"
            )
    chakra = sections.get("workload")
    if chakra is not None and chakra.chakra is not None:
        clash = [k for k in ("model", "parallelism", "jobs") if k in sections]
        if clash:
            raise ScenarioError(
                f"[{clash[0]}] and workload.chakra are both in {source}: a Chakra trace is the whole workload "
                f"(its ranks, ops and collectives); drop [{clash[0]}] or workload.chakra"
            )
    return Scenario(
        source=source,
        base_dir=(base_dir or Path.cwd()).resolve(),
        overrides=ov,
        present=frozenset(sections),
        **sections,
    )


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read scenario TOML ``path``, apply ``--set`` ``overrides`` (``"a.b=value"``), validate every section."""
    p = Path(path).expanduser()
    raw = read_toml(p, "scenario file")
    return scenario_from_dict(raw, overrides, source=str(p), base_dir=p.parent)
