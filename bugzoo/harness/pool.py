"""Sweep execution: reused worker processes for ordinary runs, one process per risky run.

A sweep has ``workers`` slots. Ordinary (silent-bug and clean) runs go to reusable workers,
forked from a server that imported torch once (:mod:`bugzoo.harness.processes`), each with one
intra-op thread. Runs that may hang or crash the interpreter (loud bugs, distributed bugs) each
get a process of their own. Both kinds share the slots, longest runs first, so the machine stays
busy to the end. Every run has a timeout: a run past it, or one whose process dies, becomes a
recorded outcome (``hang`` / ``crashed``) and only its process is replaced. Idle workers outlive
their sweep and take the next sweep of the same process.

Every run writes its own folder atomically (``bugzoo.harness.store.write_run``), from the
process that ran it: a killed sweep loses nothing that had completed.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import resource
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import pandas as pd
import torch
from omegaconf import DictConfig

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run, resolved
from bugzoo.detector_registry import load_detector
from bugzoo.harness import honeypot, store
from bugzoo.harness.processes import (
    environment_key,
    exit_with_parent,
    mark_server_copy,
    worker_context,
)
from bugzoo.harness.record import DetectorStatus, PartialRun, build_summary
from bugzoo.harness.runner import execute
from bugzoo.models import get_model
from bugzoo.scenarios import Scenario
from bugzoo.telemetry import trace_tables

log = logging.getLogger(__name__)

GRACE_S = 30.0  # start-up allowance on top of a run's timeout (process start)
HANG_EXIT = 86  # exit code of a pool worker that gave up on a hung run


@dataclass(frozen=True)
class RunTask:
    """One run of a sweep: a scenario, a seed, extra overrides and the detectors watching.

    The scenario's spec travels with the task to the worker, which composes it as it is. The
    run lands in ``<out>/<scenario>/seed<k>/``, or ``seed<k>.<tag>/`` for a tagged run: a
    buggy run's matched control (``armed=False``, tag ``control``) or an exclusive detector's
    run of its own."""

    scenario: Scenario
    seed: int
    overrides: tuple[str, ...]
    detectors: tuple[str, ...]
    out: str  # the sweep folder
    isolate: bool
    timeout_s: float
    tag: str = ""  # names another run of the same scenario and seed
    armed: bool = True  # False: the buggy scenario's disarmed twin, its matched control
    honeypot: bool = False  # the scenario's bug replaced by a decoy that impersonates it

    @property
    def expected_cost(self) -> float:
        """Rough relative run time, from the scenario's model."""
        return get_model(self.scenario.model).run_cost_s

    @property
    def path(self) -> Path:
        name = f"seed{self.seed}" + (f".{self.tag}" if self.tag else "")
        return Path(self.out) / self.scenario.id / name

    def compose(self) -> DictConfig:
        return compose_run([f"seed={self.seed}", *self.overrides], scenario=self.scenario)


def _init_worker() -> None:
    """Start a sweep process: torch came in with this module, once per worker; one thread."""
    exit_with_parent()
    torch.set_num_threads(1)


@contextmanager
def memory_limit(mb: int | None) -> Iterator[None]:
    """Cap the address space this process may add during the block at ``mb`` MiB (RLIMIT_AS);
    past it allocations fail and the run is recorded as crashed. The old limit comes back after,
    so a reused worker is not left capped. ``None``: no cap."""
    if not mb:
        yield
        return
    previous = resource.getrlimit(resource.RLIMIT_AS)
    size = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
    resource.setrlimit(resource.RLIMIT_AS, (size * 1024 + int(mb) * 2**20, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, previous)


@contextmanager
def private_tempdir() -> Iterator[None]:
    """A temporary folder of the run's own for the block (``tempfile`` and ``TMPDIR``), removed
    after it: two runs of a worker share no temporary file, so one cannot tell the other
    which of a pair came first."""
    folder = tempfile.mkdtemp(prefix="bugzoo-run-")
    before, before_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = folder, folder
    try:
        yield
    finally:
        tempfile.tempdir = before
        if before_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before_env
        shutil.rmtree(folder, ignore_errors=True)


def run_task(task: RunTask) -> dict:
    """Compose, run and store one task in this process; returns a small status record."""
    cfg = task.compose()
    detectors = [load_detector(name) for name in task.detectors]
    decoy = honeypot.impersonating(get_bug(cfg.bug.id)) if task.honeypot else None
    partial = PartialRun()
    watchdog = threading.Timer(task.timeout_s, _give_up, (task, partial))
    watchdog.daemon = True
    watchdog.start()
    try:
        with memory_limit(cfg.harness.get("memory_limit_mb")), private_tempdir():
            result = execute(cfg, detectors, bug=decoy, partial=partial, armed=task.armed,
                             honeypot=task.honeypot)
    finally:
        watchdog.cancel()
    store.write_run(task.path, result.config, result.trace, result.alarms, result.summary,
                    result.layers)
    return status(task, result.summary)


def status(task: RunTask, summary: dict) -> dict:
    return {"scenario": task.scenario.id, "seed": task.seed, "outcome": summary["outcome"],
            "path": str(task.path)}


def record_failure(task: RunTask, outcome: str, error: str, wall_s: float,
                   partial: PartialRun | None = None) -> dict:
    """Store a run that left no result of its own (it hung or took its process down), with
    what ``partial`` holds of it: the trace so far and the alarms raised before the end."""
    cfg = task.compose()
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    partial = partial or PartialRun()
    trace, layers = trace_tables(list(partial.rows))
    statuses = {n: DetectorStatus() for n in task.detectors}
    statuses.update({w.detector.name: w.status(wall_s) for w in partial.watches})
    summary = build_summary(cfg, bug, armed=task.armed, trace=trace, outcome=outcome, error=error,
                            wall_s=wall_s, detectors=statuses, honeypot=task.honeypot)
    alarms = pd.DataFrame([a for w in partial.watches for a in list(w.alarms)],
                          columns=store.ALARM_COLUMNS)
    store.write_run(task.path, resolved(cfg), trace, alarms, summary, layers)
    return status(task, summary)


def _give_up(task: RunTask, partial: PartialRun) -> None:
    """The run passed its timeout (from the watchdog thread): store what it made, end here."""
    try:
        record_failure(task, "hang", f"still running after {task.timeout_s:g} s",
                       task.timeout_s, partial)
    finally:
        os._exit(HANG_EXIT)


def _one_run_main(task: RunTask) -> None:
    """Entry of a one-run process (a risky task): run it, store it, exit. A run on several
    ranks forks them from here, a fresh copy of the fork server."""
    _init_worker()
    mark_server_copy()
    run_task(task)


def _worker_main(conn: Connection) -> None:
    """Entry of a reusable worker: run each task it is sent until it is sent ``None``."""
    _init_worker()
    while (task := conn.recv()) is not None:
        try:
            record = run_task(task)
        except Exception as e:  # setup failed before the run could record itself
            record = {"setup_error": f"{type(e).__name__}: {e}"}
        conn.send(record)


@dataclass
class Slot:
    """A sweep process and the task it was last given: a reusable worker (``conn`` set) or a
    one-run process."""

    proc: BaseProcess
    conn: Connection | None
    task: RunTask | None = None
    started: float = 0.0
    given_at: float = 0.0  # wall-clock time the task was given (a stored record must be newer)

    def give(self, task: RunTask) -> Slot:
        self.task, self.started, self.given_at = task, time.monotonic(), time.time()
        if self.conn is not None:
            self.conn.send(task)
        return self

    def result(self) -> dict | None:
        """The task's status record once it has finished (or hung, or crashed); else ``None``."""
        task, wall = self.task, time.monotonic() - self.started
        hung = f"still running after {task.timeout_s:g} s"
        if self.conn is not None and self.conn.poll():
            try:
                record = self.conn.recv()
            except EOFError:  # the worker died mid-run: judged by its exit code below
                record = None
            if record is not None and "setup_error" in record:
                return record_failure(task, "crashed", record["setup_error"], wall)
            if record is not None:
                return record
        if self.proc.is_alive():
            if wall < task.timeout_s + GRACE_S:
                return None
            self.proc.kill()
            self.proc.join()
            return record_failure(task, "hang", hung, wall)
        self.proc.join()
        if self.conn is None and self.proc.exitcode == 0 and store.is_complete(task.path):
            return status(task, store.read_summary(task.path))
        if self.proc.exitcode == HANG_EXIT:  # its watchdog stored what the run had made
            summary = task.path / "summary.json"
            if summary.is_file() and summary.stat().st_mtime >= self.given_at:
                return status(task, store.read_summary(task.path))
            return record_failure(task, "hang", hung, wall)
        return record_failure(task, "crashed",
                              f"run process exited with code {self.proc.exitcode}", wall)


def run_tasks(tasks: list[RunTask], workers: int) -> Iterator[dict]:
    """Run every task, at most ``workers`` at once, longest first; yield each task's status
    record as it finishes, with ``held_s``, the seconds it held its slot.

    Ordinary tasks go to reusable workers, risky ones (``isolate``) to a process of their own;
    both kinds share the same ``workers`` slots, so neither waits for the other to drain. A
    task whose process dies or passes its timeout is recorded as ``crashed`` or ``hang``, and
    only that process is replaced.
    """
    ctx = worker_context()
    # isolated (distributed, loud) runs first: they include the ones that sit out a timeout;
    # among runs of one cost, an order drawn with secrets (the two runs of a pair included)
    waiting = list(tasks)
    secrets.SystemRandom().shuffle(waiting)
    waiting.sort(key=lambda t: (t.isolate, t.expected_cost), reverse=True)
    busy: list[Slot] = []
    idle: list[Slot] = _unpark()  # reusable workers between tasks, and between sweeps
    finished = False
    try:
        while waiting or busy:
            while waiting and len(busy) < workers:
                task = waiting.pop(0)
                if task.isolate:  # not daemonic: a run on several ranks starts its ranks
                    slot = Slot(ctx.Process(target=_one_run_main, args=(task,)), None)
                    slot.proc.start()
                elif idle := [s for s in idle if s.proc.is_alive()]:  # one may have been killed
                    slot = idle.pop()
                else:
                    parent, child = ctx.Pipe()
                    slot = Slot(ctx.Process(target=_worker_main, args=(child,), daemon=True),
                                parent)
                    slot.proc.start()
                    child.close()
                busy.append(slot.give(task))
            wait([s.proc.sentinel for s in busy] + [s.conn for s in busy if s.conn], timeout=0.5)
            for slot in list(busy):
                if (record := slot.result()) is None:
                    continue
                busy.remove(slot)
                if slot.conn is not None and slot.proc.is_alive():
                    idle.append(slot)
                yield {**record, "held_s": time.monotonic() - slot.started}
        finished = True
    finally:
        if finished:  # a sweep that ran to its end leaves its idle workers to the next one
            _park(idle)
        else:
            _stop(idle)
        _stop(busy)


# Idle workers kept between the sweeps of one process (the GPU pass's stages, a bench and its
# overhead timing, a test session), so that each sweep does not start its own and import torch
# again. They are keyed by what a worker takes from its parent once, at its start (the
# environment, sys.path, the working folder): one started before a change of these is not given
# a task after it.
_parked: dict[int, list[Slot]] = {}


def parked_workers() -> set[int]:
    """The process ids of the idle workers kept for this process's next sweep."""
    return {slot.proc.pid for slots in _parked.values() for slot in slots}


def stop_parked_workers() -> None:
    """End the idle workers kept for this process's next sweep: the next one starts its own
    (forked from the running fork server), holding nothing from the sweeps before."""
    for key in list(_parked):
        _stop(_parked.pop(key))


def _park(slots: list[Slot]) -> None:
    """Keep ``slots`` for the next sweep; workers kept for another environment are stopped, so
    a process holds no more idle workers than its largest sweep had."""
    key = environment_key()
    for other in [k for k in _parked if k != key]:
        _stop(_parked.pop(other))
    _parked.setdefault(key, []).extend(s for s in slots if s.proc.is_alive())


def _unpark() -> list[Slot]:
    return [s for s in _parked.pop(environment_key(), []) if s.proc.is_alive()]


def _stop(slots: list[Slot]) -> None:
    """Ask reusable workers to exit, then end every process of ``slots``."""
    for slot in slots:
        if slot.conn is not None:
            with suppress(OSError):  # already gone
                slot.conn.send(None)
    for slot in slots:
        slot.proc.join(timeout=5)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join()


atexit.register(stop_parked_workers)
