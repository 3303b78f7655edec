"""The engine every study-like command runs on (study batches, sweep points, sensitivity re-plans; confidence's
re-plans use its pool): worker processes here (`run_batches` over `worker_pool`), or a Ray cluster (`execute`,
`map_tasks`). Imports nothing of the planner but its errors, so any service may use it."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from planner.errors import InvalidInput, is_count


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


def default_batch(n: int, slots: int, most: int) -> int:
    """Scenarios per task: about 8 tasks per worker (so the last ones finish together), between 1 and `most`."""
    return max(1, min(most, math.ceil(n / (8 * max(1, slots)))))


MAX_JOBS = 1024


def check_jobs(jobs: object, batch: object) -> None:
    if not is_count(jobs) or not 1 <= jobs <= MAX_JOBS:
        raise InvalidInput(f"--jobs must be a whole number from 1 to {MAX_JOBS}, got {jobs!r}")
    if batch is not None and (not is_count(batch) or not 1 <= batch <= 10_000):
        raise InvalidInput(f"--batch must be a whole number from 1 to 10000, got {batch!r}")


def execute(items: Sequence[Any], fn: Callable[[list[Any]], Any], done: Callable[[Any], None], jobs: int = 2,
            ray: str | None = None, batch: int | None = None, local_most: int = 50, ray_most: int = 100) -> None:
    """The engine every study-like command runs on (a study's scenarios, a sweep's points, the re-plans of
    --sensitivity): `fn(batch)` for the items in batches of `batch` (default `default_batch`: about 8 tasks per
    worker, at most `local_most` items locally, `ray_most` on Ray), on `jobs` local worker processes
    (planner.workers.run_batches) or on the Ray cluster at `ray`; `done(fn's result)` is called here as each batch
    finishes, in whatever order they finish. `fn` must be a module-level function (it is pickled by name)."""
    check_jobs(jobs, batch)
    if not items:
        return
    if ray is not None:
        _run_ray(items, fn, done, ray, jobs, batch, ray_most)
        return
    size = batch or default_batch(len(items), jobs, local_most)
    run_batches([list(items[k:k + size]) for k in range(0, len(items), size)], fn, done, jobs)


def _apply_batch(batch: list[tuple[Callable[[Any], Any], int, Any]]) -> list[tuple[int, Any]]:
    """A task of `map_tasks`, in a worker: (position, fn(item)) for each (fn, position, item) of the batch."""
    return [(k, fn(item)) for fn, k, item in batch]


def map_tasks(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int = 2, ray: str | None = None,
              batch: int | None = 1, finished: Callable[[int, Any], None] | None = None) -> list[Any]:
    """`[fn(item) for item in items]` on the engine (`execute`): `jobs` local processes or Ray, one item per task
    unless `batch` says otherwise. `finished(k, result)` is called here as item k finishes; the list returned is in
    the order of `items`. `fn` must be a module-level function."""
    out: list[Any] = [None] * len(items)

    def record(rows: list[tuple[int, Any]]) -> None:
        for k, value in rows:
            out[k] = value
            if finished is not None:
                finished(k, value)

    execute([(fn, k, item) for k, item in enumerate(items)], _apply_batch, record, jobs=jobs, ray=ray, batch=batch)
    return out


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InvalidInput("--ray needs the ray package: pip install 'planner[ray]'") from None
    return ray


def check_ray(address: str) -> None:
    """--ray checked before any work: ray importable, an address of a form Ray takes, something listening there."""
    _import_ray()
    if address not in ("local", "auto"):
        _probe(address)


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """A TCP connection to HOST:PORT (or ray://HOST:PORT) before ray.init, which otherwise retries an address where
    nothing listens for minutes: a typo is one error line in seconds."""
    import socket

    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"--ray {address!r}: give auto, local, HOST:PORT (the head's GCS port, 6379 by default) or "
                           "ray://HOST:PORT (the Ray client, 10001)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InvalidInput(f"--ray {address}: nothing answers at {host}:{port} ({exc.strerror or exc}); is "
                           "`ray start --head` running there?") from None


def _run_ray(items: Sequence[Any], fn: Callable[[list[Any]], Any], done: Callable[[Any], None], address: str,
             jobs: int, batch: int | None, most: int) -> None:
    """The batches as Ray tasks (one CPU each), at most four per cluster CPU in flight. A Ray session already
    started in this process (a test's `ray.init(num_cpus=2)`) is used as it is."""
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        import logging

        options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                                   "include_dashboard": False}
        check_ray(address)
        try:
            if address == "local":
                ray.init(num_cpus=jobs, **options)
            else:
                ray.init(address=address, **options)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError: ray's own words, one line
            raise InvalidInput(f"--ray {address}: cannot start or reach the Ray cluster: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
                               ) from None
        started = True
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = batch or default_batch(len(items), cpus, most)
        work = [list(items[k:k + size]) for k in range(0, len(items), size)]
        task = ray.remote(num_cpus=1, max_retries=3)(fn)
        queue = list(reversed(work))
        pending: list[Any] = []
        try:
            while queue or pending:
                while queue and len(pending) < 4 * cpus:
                    pending.append(task.remote(queue.pop()))
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    done(ray.get(ref))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()


__all__ = ["MAX_JOBS", "check_jobs", "check_ray", "default_batch", "execute", "map_tasks", "run_batches",
           "worker_pool"]
