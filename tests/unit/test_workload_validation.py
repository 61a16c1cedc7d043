"""Bad plans fail with the field names and values in the message."""

from __future__ import annotations

import pytest

from hetero_ns3.errors import PlanningError, ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.planner import resolve


def _gpus(nodes: int = 2, gpu: str = "H100-SXM", per_node: int = 8):
    return inline_gpus(ClusterSection(groups=(NodeGroupSpec(gpu, nodes, per_node),)))


@pytest.mark.parametrize(
    ("model", "kw", "nodes", "pattern"),
    [
        ("llama2-7b", {"tp": 3, "pp": 1, "dp": 1}, (1, 3), r"parallelism\.tp \(3\) must divide model\.heads \(32\)"),
        ("llama2-70b", {"tp": 16, "pp": 1}, 2, r"parallelism\.tp \(16\) must divide model\.kv_heads \(8\)"),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 2, "dp": 3},
            2,
            r"tp x parallelism\.pp x parallelism\.dp \('2 x 2 x 3 = 12'\) does not match the cluster's 16 GPUs",
        ),
        ("gpt3-125m", {"tp": 1, "pp": 16}, 2, r"parallelism\.pp \(16\) is larger than model\.layers \(12\)"),
        (
            "gpt3-125m",
            {"tp": 1, "pp": 6, "vpp": 3, "schedule": "interleaved", "dp": 1},
            (1, 6),
            r"pp x parallelism\.vpp \('6 x 3 = 18'\) is larger than model\.layers \(12\)",
        ),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 4, "global_batch": 6},
            2,
            r"global_batch \(6\) gives 3 microbatches per replica.*fewer than parallelism\.pp \(4\)",
        ),
        ("gpt3-1.3b", {"tp": 1, "pp": 1, "ep": 2}, 2, r"parallelism\.ep \(2\) needs an MoE model"),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 2, "stage_layers": [10, 10]},
            2,
            r"stage_layers \(\[10, 10\]\) sums to 20, not model\.layers \(24\)",
        ),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 4, "stage_layers": [12, 0, 6, 6]},
            2,
            r"stage_layers \(\[12, 0, 6, 6\]\) puts 0 layers on \(virtual\) stage 1: every stage needs at least 1, except",
        ),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 2, "stage_layers": [25, -1]},
            2,
            r"stage_layers \(\[25, -1\]\) puts -1 layers on \(virtual\) stage 1.*move layers there",
        ),
        (
            "gpt3-1.3b",
            {"tp": 2, "pp": 2, "replica_microbatches": [8, 8, 8]},
            2,
            r"replica_microbatches \(\[8, 8, 8\]\) needs dp \(4\) entries",
        ),
        ("mixtral-8x7b", {"tp": 2, "pp": 1, "ep": 3}, 2, r"parallelism\.ep \(3\) must divide dp \(8\)"),
        ("mixtral-8x7b", {"tp": 2, "pp": 1, "ep": 2}, 2, r"sequence_parallel \(False\) must be true for MoE"),
    ],
)
def test_bad_plans_name_fields(model: str, kw: dict, nodes: int | tuple[int, int], pattern: str) -> None:
    base = {"global_batch": 64}
    base.update(kw)
    if "stage_layers" in base:
        base["stage_layers"] = tuple(base["stage_layers"])
    if "replica_microbatches" in base:
        base["replica_microbatches"] = tuple(base["replica_microbatches"])
    with pytest.raises(ScenarioError, match=pattern):
        n, per_node = nodes if isinstance(nodes, tuple) else (nodes, 8)
        resolve(get_model(model), ParallelismSpec(**base), _gpus(n, per_node=per_node))


@pytest.mark.parametrize(
    ("kw", "pattern"),
    [
        ({"tp": 0, "global_batch": 8}, r"parallelism\.tp \(0\) must be >= 1"),
        ({"global_batch": 0}, r"parallelism\.global_batch \(0\) must be >= 1"),
        (
            {"global_batch": 10, "micro_batch": 4},
            r"global_batch \(10\) is not a multiple of parallelism\.micro_batch \(4\).*use a multiple of 4, e\.g\. 8",
        ),
        ({"global_batch": 8, "vpp": 2}, r"parallelism\.vpp \(2\) needs parallelism\.schedule = 'interleaved'"),
        ({"global_batch": 8, "zero_stage": 4}, r"zero_stage \(4\) must be 0, 1, 2 or 3"),
    ],
)
def test_field_checks(kw: dict, pattern: str) -> None:
    with pytest.raises(ScenarioError, match=pattern):
        ParallelismSpec(**kw).validate("parallelism")


def test_tp_group_mixing_gpu_types_is_planning_error() -> None:
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 4), NodeGroupSpec("A100-SXM-80GB", 1, 4))))
    with pytest.raises(PlanningError, match="mixes GPU types"):
        resolve(get_model("gpt3-1.3b"), ParallelismSpec(tp=8, global_batch=8), gpus)


def test_v100_needs_fp16() -> None:
    with pytest.raises(PlanningError, match="V100-SXM2 has no BF16"):
        resolve(get_model("gpt3-125m"), ParallelismSpec(global_batch=8), _gpus(1, "V100-SXM2"))
