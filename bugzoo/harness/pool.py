"""Sweep execution: reused worker processes for ordinary runs, one process per risky run.

Ordinary (silent-bug and clean) runs go to a ``ProcessPoolExecutor`` whose spawned workers
import torch once, use one intra-op thread and are reused across runs. Runs that may hang or
crash the interpreter (loud bugs, distributed bugs) each get their own process and a timeout,
so a hang or a hard crash becomes a recorded outcome (``hang`` / ``crashed``). A pool worker
stuck past its run's timeout exits, which breaks the pool; the runs it took down are retried
one process each, so the culprit is identified and recorded like any risky run.

Every run writes its own folder atomically (``bugzoo.harness.store.write_run``), from the
process that ran it: a killed sweep loses nothing that had completed.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bugzoo.harness import store

log = logging.getLogger(__name__)

GRACE_S = 30.0  # start-up allowance on top of a run's timeout (process spawn, torch import)
HANG_EXIT = 86  # exit code of a pool worker that gave up on a hung run
# Wall time (s) of one clean run per model on its defaults (results/perf/baselines.md). Used only
# to start the longest runs first, so that no worker is left with a long run at the very end.
RUN_COST_S = {"mlp": 1.3, "lstm": 5.6, "transformer": 5.8, "resnet": 8.8}


@dataclass(frozen=True)
class RunTask:
    """One run of a sweep: a scenario, a seed, extra overrides and the detectors watching.

    It lands in ``<out>/<scenario>/seed<k>/``, or ``seed<k>.<tag>/`` for a tagged run."""

    scenario: str
    seed: int
    overrides: tuple[str, ...]
    detectors: tuple[str, ...]
    out: str  # the sweep folder
    isolate: bool
    timeout_s: float
    tag: str = ""  # names a second run of the same scenario and seed (an exclusive detector's)

    @property
    def expected_cost(self) -> float:
        """Rough relative run time, from the model named by the scenario id (``<model>-...``)."""
        return RUN_COST_S.get(self.scenario.split("-")[0], max(RUN_COST_S.values()))

    @property
    def path(self) -> Path:
        name = f"seed{self.seed}" + (f".{self.tag}" if self.tag else "")
        return Path(self.out) / self.scenario / name

    def compose(self):
        from bugzoo.config import compose_run

        return compose_run([f"scenario={self.scenario}", f"seed={self.seed}", *self.overrides])


def _exit_with_parent() -> None:
    """End this process as soon as the sweep that started it is gone, even killed with -9:
    a killed sweep must leave no training process behind."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _init_worker() -> None:
    _exit_with_parent()
    import torch  # imported once per worker, then reused by every run it takes

    torch.set_num_threads(1)


@contextmanager
def memory_limit(mb: int | None) -> Iterator[None]:
    """Cap the address space this process may add during the block at ``mb`` MiB (RLIMIT_AS);
    past it allocations fail and the run is recorded as crashed. The old limit comes back after,
    so a reused worker is not left capped. ``None``: no cap."""
    if not mb:
        yield
        return
    import resource

    previous = resource.getrlimit(resource.RLIMIT_AS)
    size = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
    resource.setrlimit(resource.RLIMIT_AS, (size * 1024 + int(mb) * 2**20, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, previous)


def run_task(task: RunTask) -> dict:
    """Compose, run and store one task in this process; returns a small status record."""
    from bugzoo.detector import load_detector
    from bugzoo.harness.runner import execute

    cfg = task.compose()
    detectors = [load_detector(name) for name in task.detectors]
    watchdog = threading.Timer(task.timeout_s, os._exit, (HANG_EXIT,))
    watchdog.daemon = True
    watchdog.start()
    try:
        with memory_limit(cfg.harness.get("memory_limit_mb")):
            result = execute(cfg, detectors)
    finally:
        watchdog.cancel()
    store.write_run(task.path, result.config, result.trace, result.alarms, result.summary)
    return status(task, result.summary)


def status(task: RunTask, summary: dict) -> dict:
    return {"scenario": task.scenario, "seed": task.seed, "outcome": summary["outcome"],
            "path": str(task.path)}


def record_failure(task: RunTask, outcome: str, error: str, wall_s: float) -> dict:
    """Store a run that left no result of its own (it hung or took its process down)."""
    from bugzoo.bugs import get_bug
    from bugzoo.config import resolved
    from bugzoo.harness.runner import run_scenario_id

    cfg = task.compose()
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    summary = {
        "steps_completed": 0, "scenario": run_scenario_id(cfg), "model": cfg.model.name,
        "data": cfg.data.name, "bug": bug.id if bug else None,
        "category": bug.category if bug else None, "loud": bug.loud if bug else False,
        "onset": int(cfg.bug.onset) if bug else None, "seed": task.seed,
        "steps": int(cfg.harness.steps), "outcome": outcome, "crashed": outcome == "crashed",
        "hung": outcome == "hang", "error": error, "wall_s": wall_s,
        "detectors": {name: {"error": None, "seconds": 0.0, "overhead": 0.0, "alarms": 0}
                      for name in task.detectors},
    }
    store.write_run(task.path, resolved(cfg), pd.DataFrame(),
                    pd.DataFrame(columns=store.ALARM_COLUMNS), summary)
    return status(task, summary)


def _isolated_entry(task: RunTask) -> None:
    _init_worker()
    run_task(task)


def run_isolated(tasks: list[RunTask], workers: int) -> Iterator[dict]:
    """Run each task in its own spawned process, at most ``workers`` at a time."""
    ctx = multiprocessing.get_context("spawn")
    waiting, running = list(tasks), {}
    while waiting or running:
        while waiting and len(running) < workers:
            task = waiting.pop(0)
            proc = ctx.Process(target=_isolated_entry, args=(task,), daemon=True)
            proc.start()
            running[proc] = (task, time.monotonic())
        time.sleep(0.05)
        for proc, (task, started) in list(running.items()):
            wall = time.monotonic() - started
            if proc.is_alive() and wall < task.timeout_s + GRACE_S:
                continue
            if proc.is_alive():
                proc.kill()
                proc.join()
                del running[proc]
                yield record_failure(task, "hang", f"still running after {task.timeout_s:g} s",
                                     wall)
                continue
            del running[proc]
            if proc.exitcode == 0 and store.is_complete(task.path):
                yield status(task, store.read_summary(task.path))
            elif proc.exitcode == HANG_EXIT:
                yield record_failure(task, "hang", f"still running after {task.timeout_s:g} s",
                                     wall)
            else:
                yield record_failure(task, "crashed",
                                     f"run process exited with code {proc.exitcode}", wall)


def run_pooled(tasks: list[RunTask], workers: int) -> Iterator[dict]:
    """Run tasks on reused workers; tasks lost to a broken pool are retried in isolation."""
    lost: list[RunTask] = []
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                             initializer=_init_worker) as pool:
        # longest first: a greedy schedule whose tail is one short run, not one long run
        ordered = sorted(tasks, key=lambda t: t.expected_cost, reverse=True)
        futures = {pool.submit(run_task, t): t for t in ordered}
        for future in as_completed(futures):
            task = futures[future]
            try:
                yield future.result()
            except BrokenProcessPool:
                lost.append(task)
            except Exception as e:  # setup failed before the run could record itself
                yield record_failure(task, "crashed", f"{type(e).__name__}: {e}", 0.0)
    if lost:
        log.warning("a worker died; retrying %d runs one process each", len(lost))
        yield from run_isolated(lost, workers)


def run_tasks(tasks: list[RunTask], workers: int) -> Iterator[dict]:
    """Every task's status record, as runs finish (pooled runs first, then isolated ones)."""
    pooled = [t for t in tasks if not t.isolate]
    if pooled:
        yield from run_pooled(pooled, max(1, min(workers, len(pooled))))
    isolated = [t for t in tasks if t.isolate]
    if isolated:
        yield from run_isolated(isolated, max(1, workers))
