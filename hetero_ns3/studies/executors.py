"""Where the points of a sweep run: a local process pool, or a Dask distributed cluster.

Both run :func:`hetero_ns3.studies.point.run_point` on each point and yield its
:class:`~hetero_ns3.studies.point.PointResult` as points finish. A worker process lives for the whole
sweep, so it imports ns-3 (and loads the native module, from the shared build cache) once and runs
many points.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Protocol

from hetero_ns3.errors import ScenarioError
from hetero_ns3.studies.point import PointResult, PointTask, run_point

log = logging.getLogger(__name__)


class Executor(Protocol):
    name: str

    def run(self, tasks: Sequence[PointTask]) -> Iterator[PointResult]: ...

    def close(self) -> None: ...


def _lost(task: PointTask, err: BaseException) -> PointResult:
    return PointResult(task.point_id, "failed", f"worker lost: {type(err).__name__}: {err}", 0.0, "", 0)


def _worker_init() -> None:
    # Ctrl-C goes to the whole process group: let the parent decide (it terminates the workers).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalPool:
    """``workers`` spawned processes (a fresh interpreter each: no state forked from the parent)."""

    name = "local"

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ScenarioError(f"--workers ({workers}) must be >= 1")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def _start(self) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_worker_init)

    def run(self, tasks: Sequence[PointTask]) -> Iterator[PointResult]:
        self._pool = self._start()
        # At most `workers` points queued beyond those running: a killed sweep loses only what is in flight.
        todo = list(tasks)[::-1]
        running: dict[Future, PointTask] = {}
        while todo or running:
            if getattr(self._pool, "_broken", False) and not running:
                # A worker died (a crash in native code, the OOM killer): its points failed; start a new pool.
                log.warning("a worker process died; restarting the pool")
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._start()
            while todo and len(running) < 2 * self.workers and not getattr(self._pool, "_broken", False):
                t = todo.pop()
                running[self._pool.submit(run_point, t)] = t
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                task = running.pop(fut)
                try:
                    yield fut.result()
                except Exception as err:  # noqa: BLE001 - a crashed worker fails its point, not the sweep
                    yield _lost(task, err)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # stop points in flight (their run directories stay incomplete: --resume reruns them)
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)


class DaskCluster:
    """Submit the points to a running ``dask.distributed`` scheduler (``tcp://host:8786``)."""

    name = "dask"

    def __init__(self, address: str) -> None:
        try:
            from dask.distributed import Client
        except ImportError as err:
            raise ScenarioError(
                f"--scheduler needs dask.distributed ({err}); install the extra: pip install 'hetero_ns3[cluster]'"
            ) from None
        try:
            self.client = Client(address, timeout="20s")
        except ValueError as err:  # dask's address parser: no port, an unknown scheme
            raise ScenarioError(
                f"--scheduler ({address!r}) is not a scheduler address ({err}); give the address the scheduler "
                "prints, e.g. tcp://head:8786"
            ) from None
        except (OSError, TimeoutError) as err:
            raise ScenarioError(
                f"--scheduler ({address!r}): cannot connect ({err}); is the scheduler running?"
            ) from None
        self._futures: list = []

    def run(self, tasks: Sequence[PointTask]) -> Iterator[PointResult]:
        from dask.distributed import as_completed

        by_key = {}
        for t in tasks:
            fut = self.client.submit(run_point, t, key=f"hetero-ns3-point-{t.point_id}-{os.getpid()}", pure=False)
            by_key[fut.key] = t
            self._futures.append(fut)
        for fut in as_completed(self._futures):
            task = by_key[fut.key]
            try:
                yield fut.result()
            except Exception as err:  # noqa: BLE001
                yield _lost(task, err)

    def close(self) -> None:
        if self._futures:
            self.client.cancel(self._futures)
        self.client.close()


def make_executor(workers: int, scheduler: str | None) -> Executor:
    if scheduler:
        return DaskCluster(scheduler)
    return LocalPool(workers)
