"""The ``[workload]`` section: where the workload comes from when it is not compiled from ``[model]``.

Today one source: ``chakra``, a directory or glob of per-rank Chakra execution traces (MLCommons ET
files, ``*.<rank>.et``), imported by :mod:`hetero_ns3.workload.chakra_import`. See docs/chakra.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hetero_ns3.errors import field_error


@dataclass(frozen=True)
class WorkloadSection:
    """An external workload (a Chakra trace) instead of ``[model]`` + ``[parallelism]``.

    Attributes:
        chakra: directory of per-rank ET files (``NAME.<rank>.et``) or a glob of them, relative to the
            scenario file. Ranks map to the cluster's GPUs in order (rank r -> the r-th GPU).
        comm_groups: comm-group JSON (``{"pg_name": [ranks...]}``, ASTRA-sim's
            ``--comm-group-configuration``); unset: ``comm_group.json`` next to the traces if present,
            else every collective runs on all ranks.
        durations: ``trace``: a COMP node's ``duration_micros`` when it has one, else the roofline of its
            ``num_ops`` (FLOPs) and ``tensor_size`` (bytes) on the rank's GPU type; ``roofline``: always
            the roofline (to replay a trace taken on other GPUs).
        cpu_ops: nodes marked ``is_cpu_op``: ``skip`` (zero-time joins that keep the dependencies; host
            time is not modelled) or ``compute`` (timed on the GPU's compute stream like kernels).
        ctrl_deps: also order nodes after their ``ctrl_deps``. Off by default, as in the Chakra feeder that
            ASTRA-sim reads (it orders by ``data_deps`` only): the PyTorch converter writes the host
            caller -> callee tree into ``ctrl_deps`` (the vendored sample trace has cycles through them).
    """

    chakra: str | None = None
    comm_groups: str | None = None
    durations: Literal["trace", "roofline"] = "trace"
    cpu_ops: Literal["skip", "compute"] = "skip"
    ctrl_deps: bool = False

    def validate(self, where: str = "workload") -> None:
        if self.chakra is not None and not self.chakra.strip():
            raise field_error(f"{where}.chakra", self.chakra, "is empty", "name a directory or glob of *.et files")
        if self.comm_groups is not None and self.chakra is None:
            raise field_error(
                f"{where}.comm_groups", self.comm_groups, "is set without workload.chakra", "set workload.chakra too"
            )
