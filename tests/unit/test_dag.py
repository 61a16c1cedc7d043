import numpy as np
import pytest

from hetero_ns3.errors import PlanningError
from hetero_ns3.plan import dag
from hetero_ns3.plan.builder import PlanBuilder
from hetero_ns3.plan.dag import FLOW, critical_path_s


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


@pytest.mark.parametrize("block", [1, 2, 3, 1 << 20])
def test_validate_names_the_first_bad_dependency_whatever_the_block_size(monkeypatch, block):
    monkeypatch.setattr(dag, "_VALIDATE_BLOCK", block)
    b = PlanBuilder(["a", "b"])
    ids = [b.add_compute("a" if i % 2 else "b", 1.0) for i in range(7)]
    b.add_flow("a", "b", 10, deps=ids[:3])
    plan = b.build()
    plan.validate()  # a valid plan passes in any block size
    idx = plan.dep_idx.copy()
    idx[plan.dep_ptr[5]] = 6  # task 5 depends on the later task 6
    idx[plan.dep_ptr[7] + 1] = -1  # and the flow on task -1
    object.__setattr__(plan, "dep_idx", idx)
    with pytest.raises(PlanningError, match=r"^task 5 depends on task 6: deps must be earlier tasks$"):
        plan.validate()
    idx[plan.dep_ptr[5]] = 3
    with pytest.raises(PlanningError, match=r"^task 7 depends on task -1: "):
        plan.validate()


def _two_task_builder():
    b = PlanBuilder(["a", "b"])
    c = b.add_compute("a", 1.0, label="c")
    b.add_flow("a", "b", 10, deps=[c], label="f")
    return b


def test_build_without_copy_gives_the_same_plan_and_freezes_the_builder():
    a, b = _two_task_builder().build(), _two_task_builder()
    plan = b.build(copy=False)
    for name in ("kind", "gpu", "dst", "size_bytes", "duration_s", "stream", "dep_ptr", "dep_idx", "label"):
        assert np.array_equal(getattr(a, name), getattr(plan, name))
    assert a.labels == plan.labels
    with pytest.raises(BufferError):
        b.add_compute("a", 1.0)


def test_replay_appends_the_captured_block_with_new_ids_labels_and_stream_deps():
    b = PlanBuilder(["a", "b"])
    b.add_compute("b", 1.0)
    pre = b.add_compute("a", 1.0, stream=1)
    blocks = []
    for name in ("x", "y"):
        tails, first = b.stream_tails(), len(b)
        e = b.add_compute("a", 0.5, deps=[0], stream=1, label=f"{name} entry")
        f = b.add_flow("a", "b", 10, deps=[e], label=f"{name} send")
        b.add_compute("b", 0.1, deps=[f], stream=2, label=f"{name} reduce")
        blocks.append((first, tails))
    first, tails = blocks[1]
    tpl = b.capture(first, tails, {first: "a"}, {"a": [0]}, "y")
    assert tpl is not None and tpl.label_suffixes == (" entry", " send", " reduce")
    off = b.replay(tpl, "z", {"a": [pre, 0, 0]})
    plan = b.build()
    assert list(plan.deps(off)) == [pre, 0, first]  # entry deps (repeats dropped), then the stream's last task
    assert list(plan.deps(off + 2)) == [off + 1, first + 2]  # internal dep, then stream 2's last task
    assert plan.labels[plan.label[off + 1]] == "z send"


def test_capture_refuses_blocks_a_replay_would_not_reproduce():
    b = PlanBuilder(["a", "b"])
    b.add_compute("a", 1.0)
    tails, first = b.stream_tails(), len(b)
    b.add_flow("a", "b", 10, deps=[0], label="y send")  # an outside dependency, not an entry's
    assert b.capture(first, tails, {}, {}, "y") is None
    tails, first = b.stream_tails(), len(b)
    b.add_compute("a", 1.0, label="other label")
    assert b.capture(first, tails, {}, {}, "y") is None  # label without the call's prefix


def test_flow_connections_group_by_pair_category_and_channel() -> None:
    b = PlanBuilder(["a", "b", "c"])
    f0 = b.add_flow("a", "b", 10, [], label="x ring/Simple ch0 send", category="tp", channel=0)
    f1 = b.add_flow("a", "b", 10, [f0], label="y ring/Simple ch1 send", category="tp", channel=1)
    c0 = b.add_compute("a", 1e-6, [f1], label="kernel")
    f2 = b.add_flow("a", "b", 10, [c0], label="z ring/Simple ch0 send", category="tp", channel=0)  # same as f0
    f3 = b.add_flow("a", "b", 10, [], label="w ring/Simple ch0 send", category="dp", channel=0)  # other communicator
    f4 = b.add_flow("b", "a", 10, [], label="v ring/Simple ch0 send", category="tp", channel=0)  # other direction
    f5 = b.add_flow("a", "c", 10, [], label="p2p", category="pp")  # no collective (channel -1): channel 0
    conn = b.build().flow_connections()
    assert conn[c0] == -1
    assert conn[f0] == conn[f2] == 0
    assert [conn[f1], conn[f3], conn[f4], conn[f5]] == [1, 2, 3, 4]


def test_channel_column_not_the_label_decides_the_connection() -> None:
    """The channel is a column set by whoever adds the task; a ``ch<c>`` word in a label means nothing."""
    b = PlanBuilder(["a", "b"])
    f0 = b.add_flow("a", "b", 10, [], label="job ch7 send", category="tp", channel=2)
    f1 = b.add_flow("a", "b", 10, [f0], label="job ch2 send", category="tp", channel=2)
    f2 = b.add_flow("a", "b", 10, [f1], label="job ch2 send", category="tp", channel=3)
    k = b.add_compute("a", 1e-6, [f2], label="gemm ch1")
    plan = b.build()
    assert plan.channel.dtype == np.int16
    assert plan.channel.tolist() == [2, 2, 3, -1]
    conn = plan.flow_connections()
    assert conn[f0] == conn[f1] != conn[f2] and conn[k] == -1


def test_channel_out_of_range_is_refused() -> None:
    b = PlanBuilder(["a", "b"])
    with pytest.raises(PlanningError, match=r"channel -2"):
        b.add_flow("a", "b", 10, label="x", channel=-2)
    with pytest.raises(PlanningError, match=r"channel 40000"):
        b.add_compute("a", 1e-6, label="x", channel=40000)
