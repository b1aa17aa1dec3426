"""``bugzoo bench``: sweep scenarios x seeds with every selected detector watching, then score.

Default: every buggy scenario (minus those marked ``excluded: <reason>`` and those needing CUDA
when there is none), each run paired with its disarmed twin (its matched control), and every
healthy variant, x 3 seeds x the default detector suite, into ``results/runs/<sweep>``. The
detectors share one run per scenario and seed, except exclusive ones (``Detector.exclusive``,
e.g. ``anomaly``), which get a run of their own each.

``--split dev`` (the default) trains seeds 0,1,2 (or ``--seeds``): the seeds of the published
traces, fit to tune on. ``--split test`` draws fresh training and data seeds from OS entropy
when the sweep starts and records them in its folder (``split.json``): the split a citable score
comes from, since no detector can have seen its runs.
Resumable: complete run folders are skipped, so rerunning after a crash or ``kill -9`` only
does what is missing (a test sweep keeps the seeds it drew). ``--launcher NAME`` runs the same
plan as jobs of a Hydra launcher, a SLURM cluster's among them (:mod:`bugzoo.harness.launch`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from bugzoo.commands import command_line
from bugzoo.detector import is_sealed
from bugzoo.detector_registry import SELECTORS, detector_class, select_detectors
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.launch import LAUNCH_DIR, check_launcher, launch
from bugzoo.harness.sweep import (
    MAX_WORKERS,
    QUICK_OVERRIDES,
    Split,
    is_done,
    plan_runs,
    remove_partial,
    run_timeout,
    select_scenarios,
    sweep,
    sweep_options,
    sweep_parser,
)
from bugzoo.judge.lite import frozen_scenarios
from bugzoo.judge.outcomes import RUN_KEYS, detector_failures, suite_members
from bugzoo.judge.perf import time_pairs
from bugzoo.judge.replay import replay_bench
from bugzoo.judge.scoring import OVERHEAD_FILE, score_sweep
from bugzoo.judge.sealed import score_sweep_sealed

log = logging.getLogger(__name__)

BENCH_SEEDS = "0,1,2"
OVERHEAD_BLOCKS, QUICK_OVERHEAD_BLOCKS = 15, 6  # blocks of 4 steps timed against the bare loop


def the_split(out: Path, name: str, seeds: list[int], runs: int = len(BENCH_SEEDS.split(",")),
              board: str | None = None) -> Split:
    """The sweep's split: the one its folder records (a resumed sweep keeps the seeds it drew),
    else a new one, recorded (a test split of ``runs`` fresh seeds; ``board`` names a board
    such as Lite, for its title). Refuses to mix splits in one folder."""
    if known := store.read_split(out):
        if known["name"] != name:
            raise UsageError(f"{out} holds a {known['name']} split; a {name} split needs a "
                             "folder of its own (--out or --sweep)")
        if name == "test":
            return Split("test", tuple(known["seeds"]), tuple(known["data_offsets"]),
                         known.get("drawn"))
    split = Split.test(runs) if name == "test" else Split.dev(seeds)
    store.write_split(out, {**split.as_dict(), **({"board": board} if board else {})})
    return split


@contextmanager
def recorded_if_stopped(out: Path, tasks: list, start: float, workers: int,
                        made: int | None = None) -> Iterator[None]:
    """Record the command's wall time and the runs it made in ``sweep_time.csv`` if it is
    stopped (Ctrl-C, or SIGTERM as a batch system or a closing session sends it), so that a
    sweep finished by a later command still accounts for all its time: each command adds its
    row. ``made``: the runs made before this part (else counted from the stored runs)."""
    before = None if made is not None else sum(is_done(t) for t in tasks)
    main_thread = threading.current_thread() is threading.main_thread()  # signals go there
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        yield
    except KeyboardInterrupt:
        if main_thread:  # a second SIGTERM ends the process at once
            signal.signal(signal.SIGTERM, previous)
        runs = made if made is not None else sum(is_done(t) for t in tasks) - before
        store.add_sweep_time(out, time.perf_counter() - start, runs, workers)
        log.warning("stopped after %.0f min, runs made: %d (recorded in %s); the same "
                    "command resumes the sweep", (time.perf_counter() - start) / 60, runs,
                    out / store.SWEEP_TIME)
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame) -> None:
    raise KeyboardInterrupt


def measure_overhead(out: Path, models: list[str], detectors: list[str], workers: int,
                     blocks: int, progress: bool) -> None:
    """What each detector and suite costs a user on each model, as ``bugzoo results perf overhead``
    measures it (blocks interleaved with the bare loop, telemetry off there; setup, twin run
    and teardown counted in ``paid_x``), into ``<out>/overhead.csv``. Pairs already there are
    kept, so a resumed bench measures only what is missing."""
    path = out / OVERHEAD_FILE
    rows = pd.read_csv(path).to_dict("records") if path.is_file() else []
    have = {(r["model"], r["variant"]) for r in rows}
    variants = {**{d: [d] for d in detectors}, **suite_members(detectors)}
    pairs = [(m, name, members) for m in models for name, members in variants.items()
             if (m, name) not in have]
    if pairs:
        log.info("overhead: %d detector x model pairs against the bare loop", len(pairs))
    for row in time_pairs(pairs, workers, blocks=blocks, progress=progress):
        rows.append(row)
        tmp = path.with_name(f".{path.name}.tmp")
        pd.DataFrame(rows).to_csv(tmp, index=False)
        tmp.replace(path)


def check_launcher_options(args: argparse.Namespace, launcher_overrides: list[str]) -> None:
    """``--launcher``, ``--jobs`` and ``hydra.*`` items go together, and must be valid."""
    if not args.launcher:
        if given := [o for o, v in (("--jobs", args.jobs), ("hydra.* items", launcher_overrides))
                     if v]:
            raise UsageError(f"{' and '.join(given)} configure a launcher: add --launcher NAME")
        return
    if args.jobs is not None and not 1 <= args.jobs <= MAX_WORKERS:
        raise UsageError(f"--jobs must be between 1 and {MAX_WORKERS}, got {args.jobs}")
    check_launcher(args.launcher, launcher_overrides)


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="bugzoo bench", parents=[sweep_parser()],
        description="Sweep scenarios x seeds with detectors watching, then score them.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="run-setting overrides for every run, e.g. harness.steps=100")
    p.add_argument("--quick", action="store_true",
                   help="smoke sweep: mlp clean + a few mlp bugs of distinct categories, "
                   "1 seed, 60 steps")
    p.add_argument("--full", action="store_true",
                   help="the full test-split board: every scenario at 3 fresh seeds (default, "
                   "with no scenario, seed or split chosen: bugzoo-bench Lite, the frozen "
                   "subset of `bugzoo lite`, at 1 fresh seed)")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="detector names and selectors, e.g. 'default plugins' or "
                   "'builtins,my_detector' (default: default). Selectors: "
                   + "; ".join(f"{k}: {text}" for k, (text, _) in SELECTORS.items()))
    p.add_argument("--split", choices=["dev", "test"],
                   help="dev: seeds 0,1,2 or --seeds (published, tunable); test: fresh seeds "
                   "drawn from OS entropy, recorded in the sweep folder (default: test for "
                   "Lite and --full, dev when scenarios, seeds or --quick are chosen)")
    p.add_argument("--no-overhead", action="store_true",
                   help="skip timing each detector against the bare loop (the leaderboard's "
                   "overhead column stays empty)")
    p.add_argument("--sweep", help="sweep name (default: bench, or quick with --quick)")
    p.add_argument("--out", help="sweep folder (default: results/runs/<sweep>); with "
                   "--replay, where the tables go (default: printed only)")
    p.add_argument("--launcher", metavar="NAME",
                   help="run the plan through this Hydra launcher (basic, joblib, "
                   "submitit_local, submitit_slurm) as --jobs jobs of --workers workers each, "
                   "configured by hydra.launcher.KEY=VALUE items (default: this machine's pool)")
    p.add_argument("--jobs", type=int,
                   help="with --launcher: how many jobs the runs are cut into, of about equal "
                   "cost (default: 1)")
    p.add_argument("--replay", metavar="DIR",
                   help="the same as `bugzoo replay DIR`: train nothing, score the "
                   "observation-only detectors on the runs stored in DIR")
    return p


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    """The options, the run-setting overrides, and the launcher's ``hydra.*`` overrides:
    KEY=VALUE items wherever they stand (after --detectors too)."""
    items = [a for a in argv if "=" in a and not a.startswith("-")]
    args = _parser().parse_args([a for a in argv if a not in items])
    hydra_items = [o for o in items if o.startswith("hydra.")]
    return args, [o for o in items if o not in hydra_items], hydra_items


def main(argv: list[str]) -> int:
    args, overrides, launcher_overrides = parse(argv)
    if args.replay:
        if given := [o for o, v in (("KEY=VALUE", overrides), ("--quick", args.quick),
                                    ("--scenarios", args.scenarios), ("--seeds", args.seeds),
                                    ("--sweep", args.sweep), ("--launcher", args.launcher))
                     if v]:
            raise UsageError(f"--replay scores stored runs as they are: it takes --detectors "
                             f"and --out only, not {', '.join(given)}")
        print(replay_bench(Path(args.replay), args.detectors,
                           Path(args.out) if args.out else None))
        return 0
    if args.full and (given := [o for o, v in (("--scenarios", args.scenarios), ("--seeds",
                                                args.seeds), ("--quick", args.quick),
                                                ("--split dev", args.split == "dev")) if v]):
        raise UsageError(f"--full is the whole test-split board: it takes no {', '.join(given)}")
    lite = not (args.full or args.scenarios or args.seeds or args.quick or args.split)
    split_name = args.split or ("test" if lite or args.full else "dev")
    if split_name == "test" and (args.seeds or args.quick):
        raise UsageError("--split test draws its own seeds: it takes neither --seeds nor "
                         "--quick")
    check_launcher_options(args, launcher_overrides)
    options = sweep_options(args, "0" if args.quick else BENCH_SEEDS)
    name = args.sweep or ("quick" if args.quick else "lite" if lite else "full" if args.full
                          else "bench")
    chosen = select_detectors(args.detectors)
    # collect once, check sealed: training processes load only the live detectors
    sealed = [n for n in chosen if is_sealed(detector_class(n))]
    live = [n for n in chosen if n not in sealed]
    overrides = [*(QUICK_OVERRIDES if args.quick else ()), *overrides]
    scenarios = (frozen_scenarios() if lite
                 else select_scenarios(options.patterns, quick=args.quick, controls=False))
    if not scenarios:
        raise UsageError("no scenario left to run: those chosen are excluded, need CUDA, or are "
                         "controls, which a bench runs only beside the buggy scenarios they "
                         "control (choose buggy ones, e.g. --scenarios 'mlp-*')")
    timeout = run_timeout(scenarios, overrides)
    # only now, with every input valid, may the results folder be created
    out = store.ensure_writable(Path(args.out) if args.out else Path("results/runs") / name)
    split = (the_split(out, "test", options.seeds, runs=1, board="Lite") if lite
             else the_split(out, split_name, options.seeds))
    tasks = plan_runs(scenarios, split, overrides, live, out, timeout, pairs=True,
                      collect=bool(sealed))
    remove_partial(out)
    store.write_sweep_command(out, command_line("bench", argv))
    log.info("sweep %s (%s split): %d scenarios x %d seeds, buggy runs paired with their "
             "controls, live detectors %s, sealed detectors %s, %d workers -> %s", name,
             split.name, len(scenarios), len(split.seeds), ", ".join(live) or "none",
             ", ".join(sealed) or "none", options.workers, out)
    start = time.perf_counter()
    workers = options.workers * (args.jobs or 1)
    with recorded_if_stopped(out, tasks, start, workers):
        if args.launcher:
            todo = [t for t in tasks if not is_done(t)]
            outcomes = launch(todo, out, args.launcher, launcher_overrides, args.jobs or 1,
                              options.workers, options.progress)
        else:
            outcomes = sweep(tasks, options.workers, progress=options.progress)
    log.info("runs made now: %s", ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items())
             or "none (all complete)")
    if args.launcher and (missing := [t for t in todo if not is_done(t)]):
        log.error("%d of %d runs are not stored (their %s jobs failed; logs in %s). Run the "
                  "same command again to make only those.", len(missing), len(tasks),
                  args.launcher, out / LAUNCH_DIR)
        return 1
    if not args.no_overhead:
        with recorded_if_stopped(out, tasks, start, workers, made=sum(outcomes.values())):
            measure_overhead(out, sorted({s.model for s in scenarios}), chosen,
                             options.workers,
                             QUICK_OVERHEAD_BLOCKS if args.quick else OVERHEAD_BLOCKS,
                             options.progress)
    if sealed:
        score_sweep_sealed(out, sealed, progress=options.progress)
    store.add_sweep_time(out, time.perf_counter() - start, sum(outcomes.values()), workers)
    board = score_sweep(out, command=f"bugzoo score {out}")
    for line in failure_lines(pd.read_csv(out / "outcomes.csv")):
        log.warning("%s", line)
    print(smoke_summary(out) if args.quick else board)
    return 0


def failure_lines(table: pd.DataFrame) -> list[str]:
    """One line per detector that failed on some run of the sweep: on how many, and the first
    error (each run records its detectors' errors; the board counts them)."""
    runs = len(table.drop_duplicates(RUN_KEYS))
    return [f"detector {name} failed on {row.failed_runs} of {runs} runs (first: "
            f"{row.first_error}); the board's detector_errors column counts them"
            for name, row in detector_failures(table).iterrows()]


QUICK_LINES = 40  # what --quick prints at most


def smoke_summary(out: Path) -> str:
    """What ``--quick`` prints: that it cannot rank, then per detector that alarmed its counts
    (buggy runs, twins and healthy runs with an alarm, before the onset too), no scores, no
    ranks."""
    table = pd.read_csv(out / "outcomes.csv")
    table = table[~table["honeypot"].fillna(False).astype(bool)] if "honeypot" in table else table
    counts = table.assign(hit=(table["run_role"] == "buggy") & (table["outcome"] != "miss"),
                          twin=(table["run_role"] == "control") & (table["outcome"] != "quiet"),
                          healthy=(table["run_role"] == "clean") & (table["outcome"] != "quiet"))
    per = counts.groupby("detector")[["hit", "twin", "healthy"]].sum()
    per = per[per.sum(axis=1) > 0]
    roles = table.drop_duplicates(["scenario", "seed", "run_role"])["run_role"]
    lines = [f"`bugzoo bench --quick` is a smoke test: it cannot rank detectors. It checked that "
             f"benching works on {int((roles == 'buggy').sum())} buggy runs beside their twins "
             f"and {int((roles == 'clean').sum())} healthy runs; for a board to cite, run "
             "`bugzoo bench` (Lite) or `bugzoo bench --full`.", "",
             "| detector | buggy runs alarmed | twins alarmed | healthy runs alarmed |",
             "|---|---|---|---|"]
    room = QUICK_LINES - len(lines) - 2
    shown = per.head(room)
    lines += [f"| {name} | {int(r.hit)} | {int(r.twin)} | {int(r.healthy)} |"
              for name, r in shown.iterrows()]
    left = len(per) - len(shown)
    lines += ["", (f"{left} more detectors alarmed; " if left else "")
              + f"every table is in {out / 'leaderboard.md'}."]
    return "\n".join(lines)
