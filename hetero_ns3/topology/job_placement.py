"""Where the jobs of a multi-job scenario run: whole nodes of the cluster, chosen by a policy per job.

Jobs are placed in file order; each takes whole free nodes until it has ``tp x pp x dp`` GPUs and uses the
first that many GPUs of them (by node, then local index); the rest of a partly used node stays idle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetero_ns3.errors import ScenarioError, field_error
from hetero_ns3.scenario.jobs import JobSection
from hetero_ns3.topology.spec import GpuInfo


def _take(policy: str, free: list[int], k: int, seed: int) -> list[int]:
    if policy == "packed":
        return free[:k]
    if policy == "spread":
        # Evenly over the free node range: i * len(free) / k, i = 0..k-1 (distinct since k <= len(free)).
        return [free[(i * len(free)) // k] for i in range(k)]
    rng = np.random.default_rng(seed)
    return sorted(int(x) for x in rng.choice(np.asarray(free), size=k, replace=False))


def place_jobs(
    jobs: Sequence[JobSection], gpus: Sequence[GpuInfo], where: str = "jobs"
) -> tuple[tuple[GpuInfo, ...], ...]:
    """The GPUs of each job (in job order); ScenarioError when a job does not fit or nodes clash."""
    by_node: dict[int, list[GpuInfo]] = {}
    for g in sorted(gpus, key=lambda g: (g.node, g.local_index)):
        by_node.setdefault(g.node, []).append(g)
    free = sorted(by_node)
    out: list[tuple[GpuInfo, ...]] = []
    for i, job in enumerate(jobs):
        w = f"{where}[{i}]"
        need = job.n_gpus
        if job.placement.nodes:
            nodes = list(job.placement.nodes)
            for n in nodes:
                if n not in by_node:
                    raise field_error(
                        f"{w}.placement.nodes", n, "is not a node of the cluster", f"nodes are 0..{max(by_node)}"
                    )
                if n not in free:
                    raise field_error(
                        f"{w}.placement.nodes", n, "is already used by an earlier job", "jobs cannot share nodes"
                    )
        else:
            # Smallest number of free nodes (in the policy's order of preference) that hold the job.
            k, have = 0, 0
            sizes = sorted((len(by_node[n]) for n in free), reverse=True)
            while have < need and k < len(sizes):
                have += sizes[k]
                k += 1
            if have < need:
                raise ScenarioError(
                    f"{w} ({job.name}) needs {need} GPUs (tp x pp x dp) but only {sum(sizes)} GPUs on "
                    f"{len(free)} free nodes are left; make the job smaller or the cluster larger"
                )
            nodes = _take(job.placement.policy, free, k, job.placement.seed)
            while sum(len(by_node[n]) for n in nodes) < need:  # mixed node sizes: add the next free node
                nodes.append(next(n for n in free if n not in nodes))
        chosen = [g for n in sorted(nodes) for g in by_node[n]]
        if len(chosen) < need:
            raise field_error(
                f"{w}.placement.nodes", list(nodes), f"hold {len(chosen)} GPUs, the job needs {need} (tp x pp x dp)"
            )
        out.append(tuple(chosen[:need]))
        free = [n for n in free if n not in nodes]
    return tuple(out)
