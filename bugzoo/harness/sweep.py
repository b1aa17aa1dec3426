"""Sweeps: many runs (scenarios x seeds x detectors), resumable, with progress.

The pieces every sweeping verb shares (``bench``, ``validate``, ``curves``, ``perf``): the
sweep options and their one validation, the choice of scenarios, the plan of runs, and
:func:`sweep`, which makes the runs not stored yet. A run folder that is complete and was
watched by every requested detector counts as done, so a killed sweep resumes where it stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from bugzoo import release
from bugzoo.config import compose_run
from bugzoo.detector_registry import is_exclusive
from bugzoo.errors import UsageError
from bugzoo.harness import honeypot, store
from bugzoo.harness.pool import RunTask, run_tasks
from bugzoo.scenarios import Scenario, get_scenario, list_scenarios

log = logging.getLogger(__name__)

MAX_WORKERS = 1024  # more worker processes than this on one machine is a typo


# ----------------------------------------------------------------------------- options
def sweep_parser() -> argparse.ArgumentParser:
    """The options every sweeping verb takes (use as ``parents=[sweep_parser()]``)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--scenarios", nargs="+", metavar="GLOB",
                   help="scenario ids or globs, e.g. 'mlp-*' (default: every scenario)")
    p.add_argument("--seeds", help="comma-separated seeds, e.g. 0,1,2")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="runs in parallel, one process each (default: one per CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


@dataclass(frozen=True)
class SweepOptions:
    """The sweep options, validated: scenario patterns (``None``: all), seeds, workers."""

    patterns: list[str] | None
    seeds: list[int]
    workers: int
    progress: bool


def sweep_options(args: argparse.Namespace, default_seeds: str) -> SweepOptions:
    """Validate the parsed sweep options; a bad value is a one-line UsageError."""
    if not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be between 1 and {MAX_WORKERS}, got {args.workers}")
    return SweepOptions(args.scenarios, parse_seeds(args.seeds or default_seeds), args.workers,
                        not args.no_progress)


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UsageError(
            f"--seeds takes a comma-separated list of integers, got {text!r}") from None
    if not seeds:
        raise UsageError("--seeds is empty")
    if not 0 <= seeds[0] <= seeds[-1] < 2**32:
        raise UsageError(f"--seeds must be integers in [0, 2**32), got {text!r}")
    return seeds


# ----------------------------------------------------------------------------- planning
# --quick: four mlp bugs of four categories, one of them starting mid-run (step 50), their
# controls and three healthy variants, 60 steps each
QUICK_SCENARIOS = ("mlp-double_softmax", "mlp-missing_zero_grad", "mlp-labels_one_indexed",
                   "mlp-frozen_layers", "mlp-clean-lr_x0p3", "mlp-clean-batch128",
                   "mlp-clean-constant_lr")
QUICK_OVERRIDES = ("harness.steps=60", "harness.eval_interval=20")


def select_scenarios(patterns: list[str] | None, quick: bool = False, device: str = "auto",
                     include_excluded: bool = False, controls: bool = True) -> list[Scenario]:
    """The scenarios a sweep runs: those matching ``patterns`` (default all, or with ``quick``
    the ``QUICK_SCENARIOS``) and, with ``controls``, the clean controls of the buggy ones,
    minus those excluded or unable to run on ``device`` (each logged with its reason). A bench
    pairs each buggy run with its disarmed twin instead (``controls=False``), and runs the
    clean scenarios that control no bug, the healthy variants."""
    found = list_scenarios(QUICK_SCENARIOS if quick and not patterns else patterns)
    if controls:
        found += [get_scenario(s.control) for s in found if s.control]
    else:
        controlling = {s.control for s in list_scenarios() if s.control}
        found = [s for s in found if not s.clean or s.id not in controlling]
    chosen = []
    for scenario in sorted(set(found), key=lambda s: s.id):
        if reason := scenario.skip_reason(device, include_excluded):
            log.info("skipping %s: %s", scenario.id, reason)
        else:
            chosen.append(scenario)
    return chosen


@dataclass(frozen=True)
class Split:
    """Which seeds a sweep trains: ``dev`` (the given seeds, each scenario's own data seed;
    published, replayable, fit to tune on) or ``test`` (training seeds and data-seed offsets
    drawn from OS entropy when the sweep starts, recorded with its results and never in a
    trace).
    A scenario's data seed on the test split is its own plus the slot's offset, so scenarios
    that differ by their data seed stay different."""

    name: str
    seeds: tuple[int, ...]
    data_offsets: tuple[int, ...]
    drawn: str | None = None  # when the test split's seeds were drawn (UTC)

    @classmethod
    def dev(cls, seeds: list[int]) -> Split:
        return cls("dev", tuple(seeds), (0,) * len(seeds))

    @classmethod
    def test(cls, runs: int) -> Split:
        draw = secrets.SystemRandom()
        return cls("test", tuple(draw.randrange(2**31) for _ in range(runs)),
                   tuple(draw.randrange(2**31) for _ in range(runs)),
                   datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))

    def overrides(self, scenario: Scenario, slot: int) -> list[str]:
        """The data-seed override of ``scenario``'s run in ``slot`` (none on dev)."""
        if not self.data_offsets[slot]:
            return []
        own = int((scenario.settings.get("data") or {}).get("seed", 0))
        return [f"data.seed={(own + self.data_offsets[slot]) % 2**32}"]

    def as_dict(self) -> dict:
        return {"name": self.name, "seeds": list(self.seeds),
                "data_offsets": list(self.data_offsets), "drawn": self.drawn}


def plan_runs(scenarios: list[Scenario], seeds: list[int] | Split, overrides: list[str],
              detectors: list[str], out: Path, timeout: float, pairs: bool = False,
              collect: bool = False) -> list[RunTask]:
    """One run per scenario and seed watched by every shared detector, plus one run of its own
    (tagged with its name) for each exclusive detector; with ``pairs``, each buggy run's
    disarmed twin beside it (tagged ``control``), its matched control, and per model one decoy
    pair that impersonates one of its buggy scenarios (tagged ``honeypot``,
    :mod:`bugzoo.harness.honeypot`). ``collect``: the untagged run is made even when every
    detector has a run of its own, for the sealed detectors scored on its trace."""
    split = seeds if isinstance(seeds, Split) else Split.dev(seeds)
    exclusive = [d for d in detectors if is_exclusive(d)]
    shared = tuple(d for d in detectors if d not in exclusive)
    # the untagged run exists unless every detector has a run of its own
    groups = ([("", shared)] if shared or collect or not exclusive else []) + [
        (d, (d,)) for d in exclusive]
    tasks = []
    for s in scenarios:
        for slot, seed in enumerate(split.seeds):
            extra = (*overrides, *split.overrides(s, slot))
            for tag, names in groups:
                tasks.append(RunTask(s, seed, extra, names, str(out), s.isolate, timeout, tag))
                if pairs and not s.clean:
                    tasks.append(RunTask(s, seed, extra, names, str(out), s.isolate, timeout,
                                         ".".join(filter(None, (tag, store.CONTROL_TAG))),
                                         armed=False))
    decoys = honeypot.impersonated([s for s in scenarios if not s.isolate], split.seeds)
    for s in decoys if pairs else ():
        for slot, seed in enumerate(split.seeds):
            extra = (*overrides, *split.overrides(s, slot))
            for tag, armed in ((honeypot.TAG, True),
                               (f"{honeypot.TAG}.{store.CONTROL_TAG}", False)):
                tasks.append(RunTask(s, seed, extra, shared, str(out), s.isolate, timeout, tag,
                                     armed=armed, honeypot=True))
    return tasks


def run_timeout(scenarios: list[Scenario], overrides: list[str]) -> float:
    """``harness.timeout_s`` of the sweep's runs (the first scenario's, with the overrides)."""
    return float(compose_run([f"scenario={scenarios[0].id}", *overrides]).harness.timeout_s)


# ----------------------------------------------------------------------------- running
def resume_state(task: RunTask) -> str:
    """What a sweep finds of the task's run: ``"missing"`` (no complete folder),
    ``"other code"`` (made by code other than this checkout's, :func:`made_by_todays_code`),
    ``"unwatched"`` (a requested detector did not watch it) or ``"done"``. A sweep resumed after
    the code changed makes again the runs the change decides differently, never mixing them in."""
    if not store.is_complete(task.path):
        return "missing"
    summary = store.read_summary(task.path)
    if not made_by_todays_code(summary, task.scenario.id):
        return "other code"
    watched = summary.get("detectors") or {}
    return "done" if set(task.detectors) <= set(watched) else "unwatched"


def is_done(task: RunTask) -> bool:
    """A run counts as done when today's code made it and every requested detector watched."""
    return resume_state(task) == "done"


def made_by_todays_code(summary: dict, scenario: str) -> bool:
    """Whether the stored run's code is this checkout's: the release key it records is its
    scenario's today (None for a scenario outside the release, whose code is not hashed); a
    run stored before runs recorded their key counts when it records today's release digest."""
    if "key" in summary:
        return summary["key"] == release.scenario_key(scenario)
    return summary.get("release") == release.digest()


def remove_partial(out: Path) -> None:
    """Delete temporary run folders left by a killed sweep (they were never renamed in)."""
    for tmp in out.glob("*/.seed*.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def sweep(tasks: list[RunTask], workers: int, progress: bool = True) -> Counter:
    """Run the tasks not done yet; returns a count of outcomes of the runs made now.

    The progress bar counts the runs' expected cost (:attr:`RunTask.expected_cost`, from the
    model), not their number, so its rate and time left hold while cheap and costly runs
    alternate; a resumed sweep's bar starts at what is done."""
    states = [resume_state(t) for t in tasks]
    todo = [t for t, state in zip(tasks, states, strict=True) if state != "done"]
    found = Counter(states)
    if found["done"]:
        log.info("resuming: %d of %d runs already complete", found["done"], len(tasks))
    if found["other code"]:
        log.info("making again: %d stored runs that other code made", found["other code"])
    outcomes: Counter = Counter()
    cost = {str(t.path): t.expected_cost for t in tasks}
    done_cost = sum(t.expected_cost for t in tasks) - sum(t.expected_cost for t in todo)
    made = len(tasks) - len(todo)
    with tqdm(total=round(sum(t.expected_cost for t in tasks), 1), initial=round(done_cost, 1),
              desc="runs", disable=not progress, dynamic_ncols=True,
              bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s of expected run time{postfix} "
                         "[{elapsed}<{remaining}]") as bar:
        for record in run_tasks(todo, workers):
            outcomes[record["outcome"]] += 1
            made += 1
            bar.set_postfix_str(f"{made}/{len(tasks)} runs, {record['scenario']} "
                                f"seed{record['seed']}: {record['outcome']}", refresh=False)
            bar.update(round(cost.get(record["path"], 0.0), 1))
    return outcomes
