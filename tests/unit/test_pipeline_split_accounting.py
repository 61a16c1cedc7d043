"""Megatron-Core's ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``: the embedding
and the loss each take a layer's slot, so a virtual stage may hold the embedding (or the loss) alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero_ns3.errors import ScenarioError
from hetero_ns3.scenario.cluster import ClusterSection, NodeGroupSpec, inline_gpus
from hetero_ns3.validation import simulate_scenario
from hetero_ns3.workload.models import get_model
from hetero_ns3.workload.parallel import ParallelismSpec
from hetero_ns3.workload.plan_checks import check_plan
from hetero_ns3.workload.planner import resolve

BOTH = {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}


def _plan(pp: int, vpp: int, **flags: bool) -> ParallelismSpec:
    schedule = "interleaved" if vpp > 1 else "1f1b"
    return ParallelismSpec(pp=pp, vpp=vpp, schedule=schedule, global_batch=64, **flags)


def test_split_as_megatron_builds_it() -> None:
    """126 layers + 2 slots over 16 x 8 virtual stages: one layer each, the embedding and the loss alone on the first
    and last; over 16 x 4: two each, one beside the embedding and one beside the loss; one flag shifts one end."""
    assert _plan(16, 8, **BOTH).accounted_split(126) == (0,) + (1,) * 126 + (0,)
    split = _plan(16, 4, **BOTH).accounted_split(126)
    assert (split[0], split[-1], set(split[1:-1]), sum(split)) == (1, 1, {2}, 126)
    assert _plan(3, 1, account_for_embedding_in_pipeline_split=True).accounted_split(32) == (10, 11, 11)
    assert _plan(3, 1, account_for_loss_in_pipeline_split=True).accounted_split(32) == (11, 11, 10)


def test_bad_accounted_splits_name_the_field() -> None:
    model = get_model("llama3-405b")
    with pytest.raises(ScenarioError, match=r"parallelism.pp x parallelism.vpp.*every stage needs a layer"):
        check_plan(_plan(16, 8), model, 1)
    with pytest.raises(ScenarioError, match=r"parallelism.pp x parallelism.vpp.*\(127\).*choose pp x vpp among"):
        check_plan(_plan(16, 8, account_for_embedding_in_pipeline_split=True), model, 1)
    with pytest.raises(ScenarioError, match=r"parallelism.stage_layers.*cannot be combined"):
        check_plan(replace(_plan(2, 1, **BOTH), stage_layers=(63, 63)), model, 1)


def test_embedding_and_loss_alone_on_their_stages_plan_and_run(tmp_path) -> None:
    """A 6-layer model over 2 x 4 virtual stages with both slots accounted: the first and last virtual stages hold no
    transformer layer and the plan runs on the analytic backend; without the flags the same layout is refused."""
    gpus = inline_gpus(ClusterSection(groups=(NodeGroupSpec("H100-SXM", 1, 8),)))
    model = replace(get_model("llama3-8b"), layers=6)
    r = resolve(model, replace(_plan(2, 4, **BOTH), global_batch=16), gpus)
    assert r.spec.stage_layers == (0, 1, 1, 1, 1, 1, 1, 0)
    text = (
        '[model]\nname = "llama3-8b"\nlayers = 6\nseq_len = 2048\n'
        '[parallelism]\ntp = 1\npp = 2\nvpp = 4\nschedule = "interleaved"\nglobal_batch = 64\nmicro_batch = 1\n'
        "account_for_embedding_in_pipeline_split = {0}\naccount_for_loss_in_pipeline_split = {0}\n"
        '[cluster]\ntopology = "h100-2node"\n'
    )
    p = tmp_path / "accounted.toml"
    p.write_text(text.format("true"))
    step = simulate_scenario(p)["step_time_s"]
    assert 0 < step < 10
    p.write_text(text.format("false"))
    with pytest.raises(ScenarioError, match="every stage needs a layer"):
        simulate_scenario(p)
