"""Test helper: run a buggy scenario and its control in this process and compare the bug's
symptom, as ``bugzoo validate`` does over a sweep."""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
from dataclasses import dataclass

from omegaconf import OmegaConf

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.judge.validity import compare, control_overrides, measure_symptom
from bugzoo.paths import cache_folder
from bugzoo.scenarios import get_scenario


@dataclass
class Manifestation:
    """Outcome of one check that a bug manifests: its metric in buggy and clean runs."""

    bug: str
    metric: str
    direction: str
    buggy: list
    clean: list
    p_value: float
    effect: float  # "higher"/"lower": difference of medians (buggy - clean); "event": rate diff

    def separates(self) -> bool:
        """Every buggy run is worse than every clean run (missing values count as worst)."""
        if self.direction in ("event", "varies"):
            return all(map(bool, self.buggy)) and not any(map(bool, self.clean))
        worst = -math.inf if self.direction == "lower" else math.inf
        buggy = [worst if x is None or x != x else x for x in self.buggy]
        if self.direction == "lower":
            return max(buggy) < min(self.clean)
        return min(buggy) > max(self.clean)


# the metrics the garbage of earlier tests can move: these runs share the test process
MEMORY_METRICS = ("heap_growth_mb", "peak_rss_mb")
# metrics that measure the machine as much as the run (time, memory, a hang's timeout): a value
# measured under another test's load is not this test's
MACHINE_METRICS = (*MEMORY_METRICS, "data_time_frac", "startup_s", "hung")
# the test session's controls, kept across its tests and its pytest -n workers (the tests'
# cache is the session's own: tests/conftest.py)
CONTROL_RUNS = cache_folder("control-symptoms")


def control_symptom(overrides: list[str], seed: int, metric: str, direction: str):
    """A control's symptom metric, measured once per test session: many bugs of a model share
    their control and settings, and a run's configuration decides its metric bitwise. (Not a
    metric of the machine, nor the ``varies`` check, which runs the same seed twice.)"""
    if direction == "varies" or metric in MACHINE_METRICS or CONTROL_RUNS is None:
        return settled(measure_symptom, overrides, seed, metric, direction, metric=metric)
    cfg = compose_run([*overrides, f"seed={seed}"])
    key = hashlib.sha256(f"{metric}\n{OmegaConf.to_yaml(cfg)}".encode()).hexdigest()[:20]
    path = CONTROL_RUNS / f"{key}.json"
    if path.is_file():
        return json.loads(path.read_text())["value"]
    # numpy scalars as Python's, so a kept value and a fresh one compare alike (measuring
    # composes again: the composition above, read back from this process's kept ones)
    text = json.dumps({"value": measure_symptom(overrides, seed, metric, direction)},
                      default=lambda v: v.item())
    CONTROL_RUNS.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")  # two workers may measure it at once
    partial.write_text(text)
    partial.replace(path)
    return json.loads(text)["value"]


def settled(measure, *args, metric: str):
    """``measure(*args)``, after a garbage collection when it reads ``metric`` off the heap:
    garbage of earlier tests, collected during a run, would move it by megabytes. (A collection
    in a process holding torch and pandas takes a quarter of a second, so it is done only where
    it matters.)"""
    if metric in MEMORY_METRICS:
        gc.collect()
    return measure(*args)


def check_manifests(scenario_id: str, seeds: list[int], extra: list[str] = (),
                    mechanism: tuple[str, str] | None = None) -> Manifestation:
    """Run a buggy scenario and its clean control over ``seeds`` (in this process, ``extra``
    overrides on both) and compare the bug's symptom metric, or ``mechanism``: another summary
    field and direction (tests of how a bug works, such as its share of zero gradients)."""
    scenario = get_scenario(scenario_id)
    bug = get_bug(scenario.bug)
    metric, direction = mechanism or (bug.check.metric, bug.check.direction)
    buggy = [settled(measure_symptom, [f"scenario={scenario.id}", *extra], s, metric,
                     direction, metric=metric) for s in seeds]
    clean = [control_symptom([*control_overrides(scenario), *extra], s, metric, direction)
             for s in seeds]
    comparison = compare(metric, direction, buggy, clean)
    return Manifestation(bug.id, metric, direction, buggy, clean, comparison.p_value,
                         comparison.effect)
