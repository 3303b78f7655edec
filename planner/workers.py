"""Worker processes for independent plans (study batches, sweep points, sensitivity and confidence re-plans): the
local engine every study-like command runs on. Imports nothing of the planner, so any service may use it."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def run_batches(work: Sequence[Any], fn: Callable[[Any], Any], done: Callable[[Any], None], jobs: int) -> None:
    """The local engine: `fn(batch)` for every batch of `work` on `jobs` worker processes (1, or one batch: here, in
    order); `done(result)` is called here as each finishes (those finishing together in submission order). `fn` must
    be a module-level function (it is pickled by name). planner.study.run and planner.sweep.plan_all run on it."""
    if jobs == 1 or len(work) <= 1:
        for b in work:
            done(fn(b))
        return
    from concurrent.futures import FIRST_COMPLETED, wait

    with worker_pool(min(jobs, len(work))) as pool:
        pending = {pool.submit(fn, b): k for k, b in enumerate(work)}
        while pending:
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(ready, key=pending.__getitem__):
                del pending[fut]
                done(fut.result())


def _exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """In a worker: end this process when the study, sweep or sensitivity that started it is gone (killed with
    SIGKILL, say, by a caller's timeout), instead of idling as an orphan. A daemon thread watches the parent's pid."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """Processes for independent plans (sweep points, sensitivity re-plans): spawned, not forked (OR-Tools keeps
    threads around and forking a threaded process can deadlock); each ends when its parent is gone (SIGKILL); on
    Ctrl-C, SIGTERM or an error they are terminated at once instead of finishing their plans."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_exit_with_parent, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        # No cancel_futures: the pool, now broken, fails every pending future itself; cancelling them as well races
        # its manager thread, which then prints an InvalidStateError traceback.
        pool.shutdown(wait=False)
        raise
    pool.shutdown()


__all__ = ["run_batches", "worker_pool"]
