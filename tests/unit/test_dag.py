import numpy as np
import pytest

from hetero_ns3.dag import FLOW, PlanBuilder, critical_path_s
from hetero_ns3.errors import PlanningError


def test_streams_serialize_compute_and_flows_run_concurrently():
    b = PlanBuilder(["a", "b"])
    c1 = b.add_compute("a", 1.0)
    c2 = b.add_compute("a", 2.0)  # same stream: waits for c1
    f1 = b.add_flow("a", "b", 100, deps=[c1])
    f2 = b.add_flow("a", "b", 100, deps=[c1])
    j = b.add_barrier("b", [f1, f2])
    plan = b.build()
    assert c1 in plan.deps(c2)
    t = critical_path_s(plan, flow_time_s=0.5)
    assert t.finish_s[c2] == pytest.approx(3.0)
    assert t.start_s[f1] == t.start_s[f2] == pytest.approx(1.0)
    assert t.finish_s[j] == pytest.approx(1.5)
    assert plan.n_flows == 2 and plan.kind[f1] == FLOW


def test_bad_tasks_are_rejected():
    b = PlanBuilder(["a", "b"])
    with pytest.raises(PlanningError, match="depends on unknown"):
        b.add_compute("a", 1.0, deps=[5])
    with pytest.raises(PlanningError, match="itself"):
        b.add_flow("a", "a", 10)
    with pytest.raises(PlanningError, match="size"):
        b.add_flow("a", "b", 0)
    with pytest.raises(PlanningError, match="unknown GPU"):
        b.add_compute("zz", 1.0)


def test_validate_catches_cycles_in_raw_arrays():
    b = PlanBuilder(["a"])
    b.add_compute("a", 1.0)
    b.add_compute("a", 1.0)
    plan = b.build()
    object.__setattr__(plan, "dep_idx", np.asarray([1], dtype=np.int32))
    with pytest.raises(PlanningError, match="earlier"):
        plan.validate()
