"""``bugzoo replay``: score observation-only detectors on stored runs, without training.

A detector that declares ``observation_only`` reads nothing but the Observations and the
RunView's plain facts, and a CPU trace is bitwise reproducible, so the Observations read back
from a stored run (a sweep folder or a trace set, see :mod:`bugzoo.harness.traceset`) make it
raise the alarms it raised live. Each stored run is replayed to fresh detectors through the
same :class:`~bugzoo.harness.watch.Watch` a live run uses, and the alarms are scored by
:mod:`bugzoo.judge.scoring`. Nothing stored is changed; the tables go to ``--out`` only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from bugzoo.commands import command_line
from bugzoo.detector import RunView
from bugzoo.detector_registry import SELECTORS, detector_class, load_detector, select_detectors
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.budget import budget_scope
from bugzoo.harness.traceset import StoredRun, stored_runs
from bugzoo.harness.watch import Watch, call_all, observer
from bugzoo.judge.outcomes import judge_run
from bugzoo.judge.scoring import write_boards

log = logging.getLogger(__name__)

BUDGET_S = 10.0  # per call, as a live run's harness.detector_budget_s default


def replayable(words: list[str] | None) -> list[str]:
    """The detectors ``words`` select (as ``--detectors`` reads them) that can be replayed. One
    a selector brings in that cannot is left out, logged; one named is a UsageError."""
    named = {w for arg in words or () for w in arg.split(",")} - set(SELECTORS)
    chosen, left_out = [], []
    for name in select_detectors(words):
        if detector_class(name).observation_only:
            chosen.append(name)
        elif name in named:
            raise UsageError(
                f"detector {name} cannot be replayed: it does not declare observation_only "
                "(it may read hooks, the model, the optimizer or the loaders, which a stored "
                f"run does not hold); score it with a live `bugzoo bench --detectors {name}`")
        else:
            left_out.append(name)
    if left_out:
        log.warning("not replayed, since they read the live run and not only its observations "
                    "(score them with a live `bugzoo bench`): %s", ", ".join(left_out))
    if not chosen:
        raise UsageError("no detector to replay: none selected declares observation_only")
    return chosen


def replay_view(summary: dict) -> RunView:
    """A RunView of a stored run: its plain facts, and no model, optimizer, loss or loaders."""
    return RunView(model=None, optimizer=None, loss_fn=None, train_loader=None,
                   val_loader=None, device=torch.device(summary["device"] or "cpu"),
                   num_classes=summary["num_classes"], steps=summary["steps"],
                   model_name=summary["model"], dataset=summary["dataset"],
                   loss_floor=summary.get("loss_floor") or 0.0)


def replay_run(run: StoredRun, names: list[str]) -> tuple[pd.DataFrame, dict[str, dict]]:
    """The alarms (``store.ALARM_COLUMNS``) and statuses of fresh ``names`` detectors shown
    ``run``'s Observations: set up, shown each step, torn down, as in the live run."""
    watches = [Watch(load_detector(name), BUDGET_S) for name in names]
    start = time.perf_counter()
    view = replay_view(run.summary)
    with budget_scope():
        call_all(watches, "setup", view)
        observe = observer(watches)
        for obs in run.observations():
            observe(obs)
        call_all(watches, "teardown")
    wall_s = time.perf_counter() - start
    alarms = pd.DataFrame([a for w in watches for a in w.alarms], columns=store.ALARM_COLUMNS)
    return alarms, {w.detector.name: w.status(wall_s).as_dict() for w in watches}


def replay_outcomes(runs: Iterable[StoredRun], names: list[str],
                    progress: bool = False) -> pd.DataFrame:
    """Per (detector, run) outcomes of ``names`` replayed on each of ``runs``."""
    rows = []
    for run in tqdm(list(runs), unit="run", desc="replay", disable=not progress):
        alarms, statuses = replay_run(run, names)
        elapsed = (run.trace.set_index("step")["elapsed_s"] if len(run.trace)
                   else pd.Series(dtype=float))
        rows += judge_run({**run.summary, "detectors": statuses}, alarms, elapsed)
    return pd.DataFrame(rows)


def replay_bench(source: Path, words: list[str] | None, out: Path | None) -> str:
    """Replay the detectors ``words`` select on ``source`` and score them; write the tables
    into ``out`` (when given, never into ``source``); return the leaderboard's Markdown."""
    source = Path(source)
    if out is not None and Path(out).resolve().is_relative_to(source.resolve()):
        raise UsageError(f"--out {out} is inside the replayed folder {source}: replay never "
                         "changes it")
    runs = stored_runs(source)  # a folder that holds no replayable run fails here, first
    names = replayable(words)
    start = time.perf_counter()
    table = replay_outcomes(runs, names, progress=True)
    log.info("replayed %s on %d runs in %.1f s", ", ".join(names), len(table) // len(names),
             time.perf_counter() - start)
    command = command_line("replay", [str(source), "--detectors", ",".join(names),
                                      *(["--out", str(out)] if out else [])])
    return write_boards(table, None, source, command, [Path(out)] if out else [],
                        suite_label=" (replayable)")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo replay", description=__doc__.splitlines()[0])
    p.add_argument("source", metavar="DIR",
                   help="a sweep folder or a trace set (e.g. results/traces)")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="detector names and selectors (default: every replayable one of the "
                   "default selection)")
    p.add_argument("--out", help="where the tables go (default: printed only)")
    args = p.parse_args(argv)
    print(replay_bench(Path(args.source), args.detectors, Path(args.out) if args.out else None))
    return 0
