"""``bugzoo bench``: sweep scenarios x seeds with every selected detector watching, then score.

Default: every scenario (minus those marked ``excluded: <reason>`` and those needing CUDA when
there is none) x seeds 0,1,2 x every installed detector, into ``results/runs/<sweep>``. The
detectors share one run per scenario and seed, except exclusive ones (``Detector.exclusive``,
e.g. ``anomaly``), which get a run of their own each.
Resumable: complete run folders are skipped, so rerunning after a crash or ``kill -9`` only
does what is missing.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.pool import RunTask, run_tasks

log = logging.getLogger(__name__)

DEFAULT_SEEDS = (0, 1, 2)
QUICK_BUGS = 3  # --quick: the mlp clean control plus this many mlp bug scenarios
MAX_WORKERS = 1024  # more worker processes than this on one machine is a typo
QUICK_OVERRIDES = ("harness.steps=60", "harness.eval_interval=20")


def scenario_bug(node: dict) -> str | None:
    """The bug id a scenario YAML selects (``defaults: [override /bug: <id>]``), if any."""
    for entry in node.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key.split("/")[-1].strip() == "bug":
                    return value
    return None


def scenario_plan(patterns: list[str] | None, quick: bool = False,
                  cuda: bool | None = None, include_excluded: bool = False) -> dict[str, bool]:
    """Selected scenario ids -> whether each must run isolated (loud or distributed bug)."""
    from bugzoo.bugs import get_bug
    from bugzoo.config import scenarios

    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    nodes = scenarios()
    chosen = sorted(nodes)
    if patterns:
        chosen = [s for s in chosen if any(fnmatch.fnmatch(s, p) for p in patterns)]
        if not chosen:
            raise UsageError(f"no scenario matches {' '.join(patterns)}")
    plan: dict[str, bool] = {}
    categories: dict[str, str] = {}
    for sid in chosen:
        node = nodes[sid]
        if node.get("excluded") and not include_excluded:
            log.info("skipping %s: excluded (%s)", sid, node["excluded"])
            continue
        bug = get_bug(scenario_bug(node)) if scenario_bug(node) else None
        if bug is not None and "cuda" in bug.requires and not cuda:
            log.info("skipping %s: needs CUDA", sid)
            continue
        categories[sid] = bug.category if bug else "clean"
        multi_rank = int((node.get("harness") or {}).get("world_size", 1)) > 1
        plan[sid] = multi_rank or bool(bug and (bug.loud or bug.category == "distributed"
                                                or "distributed" in bug.requires))
    if quick and not patterns:  # the mlp control plus silent mlp bugs of distinct categories
        keep = {"clean": "mlp-clean"}
        for sid, isolate in plan.items():
            if sid.startswith("mlp-") and not isolate and len(keep) <= QUICK_BUGS:
                keep.setdefault(categories[sid], sid)
        plan = {s: plan[s] for s in keep.values() if s in plan}
    return plan


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise UsageError(f"--seeds takes a comma-separated list of integers, got {text!r}") from None
    if not seeds:
        raise UsageError("--seeds is empty")
    if not 0 <= seeds[0] <= seeds[-1] < 2**32:
        raise UsageError(f"--seeds must be integers in [0, 2**32), got {text!r}")
    return seeds


def plan_tasks(plan: dict[str, bool], seeds: list[int], overrides: list[str],
               detectors: list[str], out: Path, timeout: float) -> list[RunTask]:
    """One run per scenario and seed watched by every shared detector, plus one run of its own
    (tagged with its name) for each exclusive detector."""
    from bugzoo.detector import is_exclusive

    exclusive = [d for d in detectors if is_exclusive(d)]
    shared = tuple(d for d in detectors if d not in exclusive)
    # the untagged run exists unless every detector has a run of its own
    groups = ([("", shared)] if shared or not exclusive else []) + [(d, (d,)) for d in exclusive]
    return [RunTask(sid, seed, tuple(overrides), names, str(out), isolate, timeout, tag)
            for sid, isolate in plan.items() for seed in seeds for tag, names in groups]


def run_timeout(plan: dict[str, bool], overrides: list[str]) -> float:
    """``harness.timeout_s`` of the sweep's runs (the first scenario's, with the overrides)."""
    from bugzoo.config import compose_run

    return float(compose_run([f"scenario={next(iter(plan))}", *overrides]).harness.timeout_s)


def is_done(task: RunTask) -> bool:
    """A run counts as done when its folder is complete and every requested detector watched."""
    if not store.is_complete(task.path):
        return False
    watched = store.read_summary(task.path).get("detectors") or {}
    return set(task.detectors) <= set(watched)


def remove_partial(out: Path) -> None:
    """Delete temporary run folders left by a killed sweep (they were never renamed in)."""
    for tmp in out.glob("*/.seed*.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def sweep(tasks: list[RunTask], workers: int, progress: bool = True) -> Counter:
    """Run the tasks not done yet; returns a count of outcomes of the runs made now."""
    todo = [t for t in tasks if not is_done(t)]
    if len(todo) < len(tasks):
        log.info("resuming: %d of %d runs already complete", len(tasks) - len(todo), len(tasks))
    outcomes: Counter = Counter()
    with tqdm(total=len(todo), unit="run", disable=not progress, dynamic_ncols=True) as bar:
        for record in run_tasks(todo, workers):
            outcomes[record["outcome"]] += 1
            bar.set_postfix_str(f"{record['scenario']} seed{record['seed']}: "
                                f"{record['outcome']}", refresh=False)
            bar.update()
    return outcomes


def recorded_command(argv: list[str]) -> str:
    """The bench command line as a sweep records it: without the options that change how it
    runs but not what it makes (``--workers N``, ``--no-progress``)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif arg != "--no-progress" and not arg.startswith("--workers="):
            kept.append(arg)
    return " ".join(["bugzoo bench", *kept])


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="bugzoo bench",
        description="Sweep scenarios x seeds with detectors watching, then score them.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="run-setting overrides for every run, e.g. harness.steps=100")
    p.add_argument("--quick", action="store_true",
                   help="smoke sweep: mlp clean + a few mlp bugs of distinct categories, "
                   "1 seed, 60 steps")
    p.add_argument("--scenarios", nargs="+", metavar="GLOB", help="scenario id globs")
    p.add_argument("--seeds", help="comma-separated seeds (default 0,1,2; --quick: 0)")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="detectors to watch (default: the default suite, see bugzoo list detectors)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sweep", help="sweep name (default: bench, or quick with --quick)")
    p.add_argument("--out", help="sweep folder (default: results/runs/<sweep>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str]) -> int:
    from bugzoo.detector import default_detectors, detector_names, unavailable
    from bugzoo.errors import unknown_choice
    from bugzoo.scoring import score_sweep

    # KEY=VALUE items are run-setting overrides wherever they stand (after --detectors too)
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    args = _parser().parse_args([a for a in argv if a not in overrides])
    if not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be between 1 and {MAX_WORKERS}, got {args.workers}")
    name = args.sweep or ("quick" if args.quick else "bench")
    installed = detector_names()
    for d in args.detectors or ():
        if d not in installed:
            raise unknown_choice("detector", d, installed)
        if reason := unavailable(d):
            raise UsageError(f"detector {d} cannot run here: {reason}")
    seeds = parse_seeds(args.seeds) if args.seeds else ([0] if args.quick else list(DEFAULT_SEEDS))
    chosen = args.detectors or default_detectors()
    overrides = [*(QUICK_OVERRIDES if args.quick else ()), *overrides]
    plan = scenario_plan(args.scenarios, quick=args.quick)
    if not plan:
        raise UsageError("no scenario left to run (all excluded or needing CUDA)")
    timeout = run_timeout(plan, overrides)
    # only now, with every input valid, may the results folder be created
    out = store.ensure_writable(Path(args.out) if args.out else Path("results/runs") / name)
    tasks = plan_tasks(plan, seeds, overrides, chosen, out, timeout)
    remove_partial(out)
    store.write_sweep_command(out, recorded_command(argv))
    log.info("sweep %s: %d scenarios x %d seeds, detectors %s, %d workers -> %s",
             name, len(plan), len(seeds), ", ".join(chosen), args.workers, out)
    outcomes = sweep(tasks, args.workers, progress=not args.no_progress)
    log.info("runs made now: %s", dict(outcomes) or "none (all complete)")
    board = score_sweep(out, command=f"bugzoo score {out}")
    print(board)
    return 0
