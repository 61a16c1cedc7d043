"""Building an :class:`~hetero_ns3.plan.dag.ExecutionPlan` task by task, and replaying recorded blocks.

:class:`PlanBuilder` appends compute, flow and barrier tasks to typed arrays (a few bytes per task,
no Python object per task) and adds each compute task's implicit in-order dependency on the previous
task of its (gpu, stream). :meth:`PlanBuilder.capture` records a run of tasks as a
:class:`BlockTemplate`; :meth:`PlanBuilder.replay` appends it again with shifted task ids and freshly
resolved external dependencies, which is how repeated collective calls are lowered cheaply
(``collectives/templates.py``). :meth:`PlanBuilder.build` freezes the arrays into the plan.

Units: seconds, bytes (as in :mod:`hetero_ns3.plan.dag`).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from hetero_ns3.errors import PlanningError
from hetero_ns3.plan.dag import COMPUTE, COMPUTE_STREAM, FLOW, ExecutionPlan

_MAX_CHANNEL = np.iinfo(np.int16).max


@dataclass(frozen=True)
class BlockTemplate:
    """A recorded run of tasks that :meth:`PlanBuilder.replay` appends again, shifted to new task ids.

    Made by :meth:`PlanBuilder.capture`. Every per-task field is stored as the bytes the builder
    appends, except labels (``label_prefix + label_suffixes[label_local[i]]``, re-interned per
    replay) and dependencies: *internal* ones (inside the block) are stored relative to the block's
    first task; the *external* ones are re-resolved per replay, which is what makes a replay identical
    to emitting the tasks again:

    * an *entry* task (``specials[j][1]`` is its key) depends first on ``entry_deps[key]``;
    * the first compute task of the block on each (gpu, stream) (``specials[j][2]`` is that key)
      depends last on the builder's previous compute task on that stream, if any (the implicit
      in-order stream dependency of :meth:`PlanBuilder.add_compute`).

    Repeats are dropped as :meth:`PlanBuilder.add_compute` does (first occurrence kept).
    """

    n: int
    """Tasks in the block."""
    fixed: tuple[bytes, ...]
    """kind, gpu, dst, size, duration, stream, priority, category, channel: raw bytes of the builder's arrays."""
    label_local: np.ndarray
    """int32 per task: index into ``label_suffixes`` (numbered in order of first use)."""
    label_suffixes: tuple[str, ...]
    dep_rel: np.ndarray
    """int32: internal dependencies in CSR order, relative to the block's first task."""
    dep_count: np.ndarray
    """int64 per task: internal dependencies of the task."""
    dep_end: np.ndarray
    """int64 per task: ``cumsum(dep_count)`` (the CSR ends when no external dependency is added)."""
    specials: tuple[tuple[int, Hashable | None, tuple[int, int] | None, int, int], ...]
    """(task, entry key or None, (gpu, stream) or None, start and end of its internal deps in ``dep_rel``)."""
    tails: tuple[tuple[tuple[int, int], int], ...]
    """((gpu, stream), task): the last compute task of the block on each stream it uses."""
    entry_keys: tuple[tuple[Hashable, tuple[int, int] | None], ...]
    """(entry key, (gpu, stream) or None) of the ``specials`` that are entry tasks, in order."""
    stream_keys: tuple[tuple[int, int], ...]
    """(gpu, stream) of the other ``specials`` (first compute tasks of their stream), in order."""
    tail_keys: tuple[tuple[int, int], ...]
    """The (gpu, stream) of ``tails``."""
    tail_rel: tuple[int, ...]
    """The task of ``tails``, relative to the block."""
    layouts: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Memo of :func:`_layout` per shape of the external dependencies (filled by replays)."""


def _layout(
    tpl: BlockTemplate, entry_shape: Sequence[int], stream_mask: Sequence[bool] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of a replay with the given external dependencies.

    ``entry_shape[i]`` of ``tpl.entry_keys[i]``'s task: twice its entry deps, plus 1 if it also gets
    its stream's previous task; ``stream_mask[i]``: whether ``tpl.stream_keys[i]``'s task gets its
    stream's previous task (None: all do). Returns (CSR ends relative to the block, int32 deps with
    internal ones relative to the block and 0 in external slots, positions of the external slots in
    the order :meth:`PlanBuilder.replay` lists their values: entry specials, then stream specials).
    """
    count = tpl.dep_count.copy()
    front = np.zeros(tpl.n, dtype=np.int64)
    tasks_e = [sp[0] for sp in tpl.specials if sp[1] is not None]
    tasks_s = [sp[0] for sp in tpl.specials if sp[1] is None]
    backs_s = [1] * len(tasks_s) if stream_mask is None else [1 if m else 0 for m in stream_mask]
    backs = [k % 2 for k in entry_shape] + backs_s
    fronts = [k // 2 for k in entry_shape] + [0] * len(tasks_s)
    for t, f, bk in zip(tasks_e + tasks_s, fronts, backs, strict=True):
        count[t] += f + bk
        front[t] = f
    ends = np.cumsum(count)
    starts = ends - count
    first_int = np.repeat(starts + front, tpl.dep_count)
    rank = np.arange(len(tpl.dep_rel)) - np.repeat(tpl.dep_end - tpl.dep_count, tpl.dep_count)
    dep = np.zeros(int(ends[-1]) if tpl.n else 0, dtype=np.int32)
    dep[first_int + rank] = tpl.dep_rel
    ext: list[int] = []
    for t, f, bk in zip(tasks_e + tasks_s, fronts, backs, strict=True):
        s0 = int(starts[t])
        ext.extend(range(s0, s0 + f))
        if bk:
            ext.append(int(ends[t]) - 1)
    return ends, dep, np.asarray(ext, dtype=np.intp)


class PlanBuilder:
    """Append tasks one by one; :meth:`build` freezes them into an :class:`ExecutionPlan`.

    ``add_*`` return the new task id. Dependencies must be ids already returned.
    """

    def __init__(self, gpus: Sequence[str]) -> None:
        self.gpus: tuple[str, ...] = tuple(gpus)
        self._gpu_index = {g: i for i, g in enumerate(self.gpus)}
        if len(self._gpu_index) != len(self.gpus):
            raise PlanningError("PlanBuilder: GPU names must be unique")
        # Typed arrays, not lists: a few bytes per task and no Python int objects (plans reach 10^7 tasks).
        self._kind = array("b")
        self._gpu = array("i")
        self._dst = array("i")
        self._size = array("q")
        self._dur = array("d")
        self._stream = array("h")
        self._prio = array("b")
        self._label = array("i")
        self._cat = array("h")
        self._chan = array("h")
        self._dep_ptr = array("q", [0])
        self._dep_idx = array("i")
        self._labels: dict[str, int] = {}
        self._label_texts: list[str] = []  # id -> text (the inverse of _labels)
        self._cats: dict[str, int] = {}
        self._stream_tail: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self._kind)

    def gpu_index(self, name: str) -> int:
        try:
            return self._gpu_index[name]
        except KeyError:
            raise PlanningError(f"unknown GPU {name!r} in plan; known: {list(self.gpus[:4])}...") from None

    def endpoint(self, name: str) -> int:
        """Index of ``name`` among the plan's endpoints, appending it if new.

        For flow endpoints that are not ranks of the workload, such as an NVSwitch's NVLS endpoint
        (``n3.nvls``): indices of existing names never change, so recorded blocks stay valid.
        """
        idx = self._gpu_index.get(name)
        if idx is None:
            idx = self._gpu_index[name] = len(self.gpus)
            self.gpus = (*self.gpus, name)
        return idx

    def _intern(self, table: dict[str, int], text: str) -> int:
        idx = table.get(text)
        if idx is None:
            idx = table[text] = len(table)
        return idx

    def _intern_label(self, text: str) -> int:
        idx = self._labels.get(text)
        if idx is None:
            idx = self._labels[text] = len(self._label_texts)
            self._label_texts.append(text)
        return idx

    def _append(
        self,
        kind: int,
        gpu: int,
        dst: int,
        size: int,
        dur: float,
        stream: int,
        prio: int,
        deps: Iterable[int],
        label: str,
        category: str,
        channel: int,
    ) -> int:
        tid = len(self._kind)
        if not -1 <= channel <= _MAX_CHANNEL:
            raise PlanningError(f"task {tid} ({label}) has channel {channel}; must be -1 (none) or 0..{_MAX_CHANNEL}")
        dl = deps if type(deps) is list else list(deps)  # never mutated below
        n = len(dl)
        if n == 2:  # the common case (one dependency + the stream's previous task): no dict needed
            a, b = dl
            if a == b:
                dl = [a]
            if not (0 <= a < tid and 0 <= b < tid):
                raise PlanningError(f"task {tid} ({label}) depends on unknown task ids {sorted(dl)}")
        elif n > 2:
            dl = list(dict.fromkeys(dl))  # drop repeats, keep order
            if min(dl) < 0 or max(dl) >= tid:
                raise PlanningError(f"task {tid} ({label}) depends on unknown task ids {sorted(dl)}")
        elif n and not 0 <= dl[0] < tid:
            raise PlanningError(f"task {tid} ({label}) depends on unknown task ids {dl}")
        self._kind.append(kind)
        self._gpu.append(gpu)
        self._dst.append(dst)
        self._size.append(size)
        self._dur.append(dur)
        self._stream.append(stream)
        self._prio.append(prio)
        lab = self._labels.get(label)
        self._label.append(self._intern_label(label) if lab is None else lab)
        cat = self._cats.get(category)
        self._cat.append(self._intern(self._cats, category) if cat is None else cat)
        self._chan.append(channel)
        dep_idx = self._dep_idx
        dep_idx.extend(dl)
        self._dep_ptr.append(len(dep_idx))
        return tid

    def add_compute(
        self,
        gpu: str | int,
        duration_s: float,
        deps: Iterable[int] = (),
        stream: int = COMPUTE_STREAM,
        label: str = "compute",
        category: str = "compute",
        channel: int = -1,
    ) -> int:
        """A kernel of ``duration_s`` seconds on ``gpu``'s ``stream`` (in-order after its predecessor).

        ``channel``: the collective channel the task belongs to (-1: not part of a collective)."""
        g = gpu if type(gpu) is int else self.gpu_index(gpu) if isinstance(gpu, str) else int(gpu)
        if duration_s < 0:
            raise PlanningError(f"compute task {label!r} has negative duration {duration_s}")
        deps = list(deps)
        key = (g, stream)
        tails = self._stream_tail
        prev = tails.get(key)
        if prev is not None:
            deps.append(prev)
        tid = self._append(COMPUTE, g, -1, 0, float(duration_s), stream, 0, deps, label, category, channel)
        tails[key] = tid
        return tid

    def add_flow(
        self,
        src: str | int,
        dst: str | int,
        size_bytes: int,
        deps: Iterable[int] = (),
        priority: int = 0,
        label: str = "flow",
        category: str = "comm",
        channel: int = -1,
    ) -> int:
        """``size_bytes`` from ``src`` to ``dst`` once ``deps`` are done (``channel``: as :meth:`add_compute`)."""
        s = self.gpu_index(src) if isinstance(src, str) else int(src)
        d = self.gpu_index(dst) if isinstance(dst, str) else int(dst)
        if size_bytes <= 0:
            raise PlanningError(f"flow {label!r} has size {size_bytes} bytes; must be > 0")
        if s == d:
            raise PlanningError(f"flow {label!r} goes from GPU {self.gpus[s]!r} to itself")
        if not 0 <= priority <= 7:
            raise PlanningError(f"flow {label!r} priority {priority} must be in 0..7")
        return self._append(FLOW, s, d, int(size_bytes), 0.0, -1, priority, deps, label, category, channel)

    def add_barrier(
        self, gpu: str | int, deps: Iterable[int], label: str = "join", category: str = "sync", channel: int = -1
    ) -> int:
        """A zero-time task that completes when ``deps`` do (joins dependency fans). Uses no stream.

        ``channel``: as :meth:`add_compute`."""
        g = self.gpu_index(gpu) if isinstance(gpu, str) else int(gpu)
        return self._append(COMPUTE, g, -1, 0, 0.0, -1, 0, deps, label, category, channel)

    def add_delay(
        self,
        gpu: str | int,
        duration_s: float,
        deps: Iterable[int],
        label: str = "delay",
        category: str = "sync",
        channel: int = -1,
    ) -> int:
        """A task that completes ``duration_s`` seconds after ``deps`` do and occupies no stream.

        A latency on a dependency edge (e.g. a collective step's protocol latency between a flow and the
        receiver's reduction): unlike :meth:`add_compute`, successive delays on one GPU overlap.
        ``channel``: as :meth:`add_compute`."""
        if duration_s < 0:
            raise PlanningError(f"delay task {label!r} has negative duration {duration_s}")
        g = self.gpu_index(gpu) if isinstance(gpu, str) else int(gpu)
        return self._append(COMPUTE, g, -1, 0, float(duration_s), -1, 0, deps, label, category, channel)

    def stream_tail(self, gpu: int, stream: int) -> int | None:
        """The last compute task id on (gpu index, stream), None if the stream is unused so far."""
        return self._stream_tail.get((gpu, stream))

    def stream_tails(self) -> dict[tuple[int, int], int]:
        """A copy of the last compute task id per (gpu index, stream) (for :meth:`capture`)."""
        return dict(self._stream_tail)

    def capture(
        self,
        first: int,
        tails_before: Mapping[tuple[int, int], int],
        entry_of: Mapping[int, Hashable],
        entry_deps: Mapping[Any, Sequence[int]],
        label_prefix: str,
    ) -> BlockTemplate | None:
        """Record tasks ``first ..`` (the last ones added) as a :class:`BlockTemplate`.

        ``tails_before`` is :meth:`stream_tails` taken before the block; ``entry_of[task]`` names the
        block's entry tasks and ``entry_deps[key]`` the ids they were given. The block must have been
        added through :meth:`add_compute` / :meth:`add_flow` / :meth:`add_barrier` with dependencies on
        its own tasks only, except the entry tasks' ``entry_deps``. This is checked task by task
        against the recorded arrays (and the stream state): None if any check fails or a label does not
        start with ``label_prefix``, so a template is only ever made where a replay is exact.
        """
        end = len(self._kind)
        n = end - first
        if n <= 0:
            return None
        ptr = np.frombuffer(self._dep_ptr[first : end + 1], dtype=np.int64)
        deps = np.frombuffer(self._dep_idx[int(ptr[0]) : int(ptr[-1])], dtype=np.int32)
        ptr = ptr - ptr[0]
        kind = np.frombuffer(self._kind[first:end], dtype=np.int8)
        gpu = np.frombuffer(self._gpu[first:end], dtype=np.int32)
        stream = np.frombuffer(self._stream[first:end], dtype=np.int16)
        owner = np.repeat(np.arange(n), np.diff(ptr))
        internal = deps >= first
        # Stream users: compute tasks with a stream (barriers have stream -1 and no stream dependency).
        on_stream = np.nonzero((kind == COMPUTE) & (stream >= 0))[0]
        first_on: dict[tuple[int, int], int] = {}
        last_on: dict[tuple[int, int], int] = {}
        for t in on_stream.tolist():
            key = (int(gpu[t]), int(stream[t]))
            first_on.setdefault(key, t)
            last_on[key] = t
        specials: dict[int, list] = {t: [t, None, key, 0, 0] for key, t in first_on.items()}
        for tid, entry_key in entry_of.items():
            specials.setdefault(tid - first, [tid - first, None, None, 0, 0])[1] = entry_key
        ext_owner = set(owner[~internal].tolist())
        if not ext_owner <= specials.keys():
            return None  # a dependency outside the block that neither rule explains
        dep_count = np.bincount(owner[internal], minlength=n).astype(np.int64)
        dep_end = np.cumsum(dep_count)
        for t, sp in specials.items():
            got = deps[ptr[t] : ptr[t + 1]].tolist()
            pre = list(entry_deps.get(sp[1], ())) if sp[1] is not None else []
            pre += [d for d in got if d >= first]
            if sp[2] is not None and sp[2] in tails_before:
                pre.append(tails_before[sp[2]])
            if list(dict.fromkeys(pre)) != got:
                return None
            sp[3], sp[4] = int(dep_end[t] - dep_count[t]), int(dep_end[t])
        tails = tuple((key, t) for key, t in last_on.items())
        changed = {k: v - first for k, v in self._stream_tail.items() if v >= first}
        if changed != dict(tails):
            return None
        label = np.frombuffer(self._label[first:end], dtype=np.int32)
        _, where = np.unique(label, return_index=True)
        used = label[np.sort(where)].tolist()
        texts = [self._label_texts[i] for i in used]
        if not all(t.startswith(label_prefix) for t in texts):
            return None
        local = {g: i for i, g in enumerate(used)}
        ordered = [tuple(specials[t]) for t in sorted(specials)]
        fixed = tuple(
            a[first:end].tobytes()
            for a in (
                self._kind, self._gpu, self._dst, self._size, self._dur, self._stream, self._prio, self._cat, self._chan
            )
        )  # fmt: skip
        return BlockTemplate(
            n=n,
            fixed=fixed,
            label_local=np.asarray([local[i] for i in label.tolist()], dtype=np.int32),
            label_suffixes=tuple(t[len(label_prefix) :] for t in texts),
            dep_rel=(deps[internal] - first).astype(np.int32),
            dep_count=dep_count,
            dep_end=dep_end,
            specials=tuple(ordered),
            tails=tails,
            entry_keys=tuple((sp[1], sp[2]) for sp in ordered if sp[1] is not None),
            stream_keys=tuple(sp[2] for sp in ordered if sp[1] is None),
            tail_keys=tuple(k for k, _ in tails),
            tail_rel=tuple(t for _, t in tails),
        )

    def replay(self, tpl: BlockTemplate, label_prefix: str, entry_deps: Mapping[Any, Sequence[int]]) -> int:
        """Append ``tpl``'s tasks again (labels ``label_prefix + suffix``); returns the first new task id.

        The result equals adding the recorded tasks one by one with the same calls, given
        ``entry_deps`` for the entry tasks (see :class:`BlockTemplate`).
        """
        off = len(self._kind)
        tails = self._stream_tail
        vals: list[int] = []
        entry_shape: list[int] = []
        for ekey, skey in tpl.entry_keys:
            front = entry_deps.get(ekey, ())
            if len(front) > 1:
                front = list(dict.fromkeys(front))
            vals.extend(front)
            back = 0
            if skey is not None:
                prev = tails.get(skey)
                if prev is not None and prev not in front:
                    vals.append(prev)
                    back = 1
            entry_shape.append(2 * len(front) + back)
        prevs = list(map(tails.get, tpl.stream_keys))
        stream_mask: tuple[bool, ...] | None = None  # None: every stream has a previous task
        if None in prevs:
            stream_mask = tuple([p is not None for p in prevs])
            vals.extend(p for p in prevs if p is not None)
        else:
            vals.extend(cast("list[int]", prevs))  # no None in prevs on this branch
        if vals and (min(vals) < 0 or max(vals) >= off):
            raise PlanningError(f"tasks from {off} on depend on unknown task ids {sorted(set(vals))}")
        key = (tuple(entry_shape), stream_mask)
        layout = tpl.layouts.get(key)
        if layout is None:
            layout = tpl.layouts[key] = _layout(tpl, entry_shape, stream_mask)
        ends, base_dep, ext_pos = layout
        dep = base_dep + off  # int32 (a Python int does not widen numpy's dtype)
        if vals:
            dep[ext_pos] = vals
        texts = [label_prefix + s for s in tpl.label_suffixes]  # distinct, in order of first use
        n_labels = len(self._label_texts)
        if self._labels.keys().isdisjoint(texts):  # all new: ids n_labels, n_labels + 1, ... in this order
            self._labels.update(zip(texts, range(n_labels, n_labels + len(texts)), strict=True))
            self._label_texts.extend(texts)
            label = tpl.label_local + n_labels
        else:
            label = np.asarray([self._intern_label(t) for t in texts], dtype=np.int32)[tpl.label_local]
        arrays: tuple[array[Any], ...] = (
            self._kind,
            self._gpu,
            self._dst,
            self._size,
            self._dur,
            self._stream,
            self._prio,
            self._cat,
            self._chan,
        )
        for arr, raw in zip(arrays, tpl.fixed, strict=True):
            arr.frombytes(raw)
        # numpy's stubs give ndarray __buffer__ only for Python >= 3.12 (mypy checks as 3.11)
        self._label.frombytes(memoryview(label).cast("B"))  # type: ignore[arg-type]
        self._dep_ptr.frombytes(memoryview(ends + self._dep_ptr[-1]).cast("B"))  # type: ignore[arg-type]
        self._dep_idx.frombytes(memoryview(dep).cast("B"))  # type: ignore[arg-type]
        tails.update(zip(tpl.tail_keys, [r + off for r in tpl.tail_rel], strict=True))
        return off

    def build(self, copy: bool = True) -> ExecutionPlan:
        """Freeze the tasks into an :class:`ExecutionPlan` (validated).

        ``copy=False`` hands the builder's buffers to the plan instead of copying them, which halves
        the peak memory of large plans; the builder then must not be appended to (``BufferError``).
        """

        def arr(a: array, dtype: type) -> np.ndarray:
            out: np.ndarray = np.frombuffer(a, dtype=dtype)
            return out.copy() if copy else out

        plan = ExecutionPlan(
            gpus=self.gpus,
            kind=arr(self._kind, np.int8),
            gpu=arr(self._gpu, np.int32),
            dst=arr(self._dst, np.int32),
            size_bytes=arr(self._size, np.int64),
            duration_s=arr(self._dur, np.float64),
            stream=arr(self._stream, np.int16),
            priority=arr(self._prio, np.int8),
            dep_ptr=arr(self._dep_ptr, np.int64),
            dep_idx=arr(self._dep_idx, np.int32),
            label=arr(self._label, np.int32),
            labels=tuple(self._label_texts),
            category=arr(self._cat, np.int16),
            categories=tuple(self._cats),
            channel=arr(self._chan, np.int16),
        )
        plan.validate()
        return plan
