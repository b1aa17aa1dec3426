"""``bugzoo results perf profile``: where a sweep's wall time goes, phase by phase.

The sweep is the one a bench plans (each buggy run beside its disarmed twin, the healthy
variants, the default detectors watching), at one seed. It is measured twice, and telemetry
once more on each model:

1. **Inside the runs.** The pooled runs, one after another in this process, with a stopwatch
   around each phase of a run: composition, data generation, the rest of the build, training
   steps, evaluation, telemetry, detector calls, the twin run some detectors ask for, and
   writing the run folder. A phase's time is its own: a call timed inside another (data
   generation inside the build) is taken out of the outer one, and everything inside the twin
   run counts as the twin run. What no phase covers is the rest: the training loop's own code
   between the phases (reading its settings, the schedule, early stopping), loading the
   detectors, the setup digest and the summary. Isolated runs (loud and distributed ones) may
   crash or hang this process, so they are measured in the sweep only.
2. **The sweep.** All runs on the pool with ``workers`` workers: the wall time against the time
   the workers' slots held a run, and the time the slots stood idle (the fork server's start,
   handing out runs, and the tail, when fewer runs are left than workers). The pooled runs'
   time in the first pass is given beside it; it is no exact share of the second, which ran
   without the stopwatch and with two runs sharing the machine.
3. **Telemetry, part by part.** One clean run of each model on its defaults, each in a fresh
   worker process, with the stopwatch around the training step and each part of the step's
   telemetry (gradient statistics, parameter and update norms, the memory readings, the
   observation and its row).

The stopwatch wraps a handful of methods, so it costs about a microsecond per call; no phase is
sampled.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from bugzoo import telemetry
from bugzoo.config import compose_run
from bugzoo.detector_registry import select_detectors
from bugzoo.harness import pool, runner, store
from bugzoo.harness.processes import worker_context
from bugzoo.harness.sweep import plan_runs, run_timeout, select_scenarios
from bugzoo.harness.watch import Watch
from bugzoo.telemetry import Observation, Telemetry
from bugzoo.train import Trainer

OTHER = "the rest: the loop's own code between phases, loading detectors, the summary"
# (phase, the callables it times as (owner, attribute)); the last phase absorbs what it calls
PHASES: list[tuple[str, list[tuple[object, str]]]] = [
    ("composition (Hydra)", [(pool.RunTask, "compose")]),
    ("data generation", [(Trainer, "load_data")]),
    ("build: model, optimiser, loaders", [(Trainer, "build")]),
    ("training steps", [(Trainer, "run_step")]),
    ("evaluation (validation, holdout, serving)",
     [(Trainer, "evaluate"), (runner, "measure"), (runner, "serving_check")]),
    ("telemetry (norms, observations, trace tables)",
     [(Telemetry, "measure_gradients"), (Telemetry, "observe"), (Observation, "row"),
      (runner, "trace_tables")]),
    ("detector calls", [(Watch, "call")]),
    ("writing the run folder (Parquet, JSON)", [(store, "write_run")]),
    ("the twin run some detectors ask for", [(runner, "twin_for")]),
]
ABSORBING = frozenset({"the twin run some detectors ask for"})
STEP = "training step (forward, backward, optimiser)"
# one step's telemetry, part by part (``Telemetry.observe`` keeps the one device sync)
TELEMETRY_PARTS: list[tuple[str, list[tuple[object, str]]]] = [
    (STEP, [(Trainer, "run_step")]),
    ("gradient statistics (flatten, norms, counts)", [(Telemetry, "measure_gradients")]),
    ("parameter and update norms", [(Telemetry, "measure_update")]),
    ("resident memory (RSS, one read of /proc)", [(telemetry, "rss_mb")]),
    ("heap in use (glibc's mallinfo2)", [(telemetry, "heap_mb")]),
    ("the observation (one device sync, the record)", [(Telemetry, "observe")]),
    ("the trace row", [(Observation, "row")]),
]


class Stopwatch:
    """Exclusive time per phase: a timed call's time, less the timed calls inside it; inside a
    call of an ``absorbing`` phase nothing else is timed."""

    def __init__(self, absorbing: frozenset[str] = frozenset()) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.absorbing = absorbing
        self._stack: list[list] = []  # [phase, start, time of timed calls inside]

    def wrap(self, phase: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            if self._stack and self._stack[-1][0] in self.absorbing:
                return function(*args, **kwargs)
            frame = [phase, time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return function(*args, **kwargs)
            finally:
                self._stack.pop()
                spent = time.perf_counter() - frame[1]
                self.seconds[phase] += spent - frame[2]
                if self._stack:
                    self._stack[-1][2] += spent
        return timed


@contextmanager
def stopwatch(phases: list[tuple[str, list[tuple[object, str]]]] = PHASES,
              absorbing: frozenset[str] = ABSORBING) -> Iterator[Stopwatch]:
    """A Stopwatch around every phase's callables, put back as they were afterwards."""
    watch, saved = Stopwatch(absorbing), []
    for phase, targets in phases:
        for owner, name in targets:
            saved.append((owner, name, owner.__dict__[name] if isinstance(owner, type)
                          else getattr(owner, name)))
            setattr(owner, name, watch.wrap(phase, getattr(owner, name)))
    try:
        yield watch
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


@dataclass(frozen=True)
class SweepProfile:
    """The tables: ``phases`` inside the pooled runs, ``sweep`` on the pool's slots,
    ``telemetry`` per step on each model."""

    phases: pd.DataFrame
    sweep: pd.DataFrame
    telemetry: pd.DataFrame
    runs: int
    workers: int


def profile_sweep(patterns: list[str] | None, seed: int, workers: int, models: list[str],
                  progress: Callable[[str], None] = lambda _: None) -> SweepProfile:
    scenarios = select_scenarios(patterns, controls=False)
    detectors = select_detectors(["default"])
    timeout = run_timeout(scenarios, [])
    torch.set_num_threads(1)  # as in a worker
    with tempfile.TemporaryDirectory(prefix="bugzoo-profile-") as tmp:
        serial = plan_runs(scenarios, [seed], [], detectors, Path(tmp) / "serial", timeout,
                           pairs=True)
        pooled = [t for t in serial if not t.isolate]
        progress(f"inside the runs: {len(pooled)} pooled runs, one after another")
        total = 0.0
        with stopwatch() as watch:
            for task in pooled:
                t0 = time.perf_counter()
                pool.run_task(task)
                total += time.perf_counter() - t0
        phases = phase_table(watch.seconds, total, len(pooled))
        tasks = plan_runs(scenarios, [seed], [], detectors, Path(tmp) / "sweep", timeout,
                          pairs=True)
        progress(f"the sweep: {len(tasks)} runs on {workers} workers")
        t0 = time.perf_counter()
        records = list(pool.run_tasks(tasks, workers))
        wall = time.perf_counter() - t0
    progress(f"telemetry per step: {', '.join(models)}")
    return SweepProfile(phases, sweep_table(records, tasks, wall, workers, total),
                        telemetry_table(models), len(tasks), workers)


def telemetry_table(models: list[str]) -> pd.DataFrame:
    """Microseconds per step of each part of telemetry beside the training step itself, from
    one clean run of each model on its defaults, each in a fresh worker process with one
    thread (as ``perf overhead`` times them), and telemetry's cost as a share of a step."""
    with ProcessPoolExecutor(1, mp_context=worker_context(), max_tasks_per_child=1,
                             initializer=torch.set_num_threads, initargs=(1,)) as fresh:
        frame = pd.DataFrame({model: fresh.submit(telemetry_per_step, model).result()
                              for model in models})
    parts = frame.drop(index=STEP)
    frame.loc["telemetry, all parts"] = parts.sum()
    frame.loc["step with telemetry / step without"] = 1 + parts.sum() / frame.loc[STEP]
    return frame.round(2).rename_axis("us_per_step").reset_index()


def telemetry_per_step(model: str) -> dict[str, float]:
    """Microseconds per step of the training step and each part of telemetry, one clean run
    of ``model`` under the stopwatch."""
    with stopwatch(TELEMETRY_PARTS, frozenset()) as watch:
        steps = len(runner.execute(compose_run([f"scenario={model}-clean"])).trace)
    return {part: 1e6 * watch.seconds[part] / steps for part, _ in TELEMETRY_PARTS}


def phase_table(seconds: dict[str, float], total: float, runs: int) -> pd.DataFrame:
    rows = [(phase, seconds.get(phase, 0.0)) for phase, _ in PHASES]
    rows.append((OTHER, total - sum(s for _, s in rows)))
    frame = pd.DataFrame(rows, columns=["phase", "seconds"])
    frame["share"] = frame["seconds"] / total
    frame["ms_per_run"] = 1000 * frame["seconds"] / runs
    total_row = pd.DataFrame([{"phase": f"all {runs} pooled runs", "seconds": total,
                               "share": 1.0, "ms_per_run": 1000 * total / runs}])
    return pd.concat([frame.sort_values("seconds", ascending=False), total_row],
                     ignore_index=True).round({"seconds": 2, "share": 3, "ms_per_run": 1})


def sweep_table(records: list[dict], tasks: list[pool.RunTask], wall: float, workers: int,
                serial_pooled: float) -> pd.DataFrame:
    """Slot time, ``wall * workers``, split into the time runs held a slot (pooled, isolated)
    and the time slots stood idle; beside it, the pooled runs' time one after another."""
    isolated = {str(t.path) for t in tasks if t.isolate}
    held = defaultdict(float)
    for record in records:
        held["isolated" if record["path"] in isolated else "pooled"] += record["held_s"]
    slots = wall * workers
    idle = slots - held["pooled"] - held["isolated"]
    rows = [
        ("wall time", wall),
        ("slot time (wall x workers)", slots),
        ("held by pooled runs", held["pooled"]),
        ("held by isolated runs (own process; hangs sit out their timeout)", held["isolated"]),
        ("idle: fork server start, hand-out, the tail", idle),
        ("for comparison: the pooled runs one after another, under the stopwatch",
         serial_pooled),
    ]
    frame = pd.DataFrame(rows, columns=["part", "seconds"])
    frame["share_of_slots"] = frame["seconds"] / slots
    frame.loc[0, "share_of_slots"] = float("nan")
    frame = frame.round({"seconds": 1, "share_of_slots": 3})
    return frame.astype({"share_of_slots": object}).fillna("")
