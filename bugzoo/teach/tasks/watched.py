"""``bugzoo task watched``: the sealed detectors measured on scripts bugzoo does not run.

Every valid exported pair (``results/validity_exported.csv``) is run as its task scripts
(``python train.py SEED``) under ``bugzoo watch``, on a seed the pair was not validated on,
buggy and fixed. That gives recall on the buggy scripts and false alarms on the fixed ones, and
beside them the board's figures for the same scenarios and detectors. Five clean loops written
the way tutorials write them (``tests/loops/``), each told its classes and steps as its author
would, give false alarms on code bugzoo did not write. Overhead is a script's wall time watched
over unwatched, the two run alternately in the same pool (the detectors' modules imported
before the clock starts: a one-off cost of the first watch in a process).

Each script runs in a fresh process forked from bugzoo's fork server, on one thread.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from bugzoo.detector_registry import load_detector
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness.processes import worker_context
from bugzoo.harness.store import ensure_writable
from bugzoo.integrations.recorder import ALARMS_FILE, DEFAULT_DETECTORS, sealed_detectors
from bugzoo.integrations.watch_command import run_watched
from bugzoo.judge.stats import clopper_pearson
from bugzoo.judge.tables import markdown
from bugzoo.paths import ROOT
from bugzoo.scenarios import registry
from bugzoo.teach.tasks.script import task_scripts

SEED = 11  # the exported pairs were validated on seeds 0-4 (and 0-9)
LOOPS = ROOT / "tests" / "loops"
# what each clean loop's author knows of it: (classes, optimizer steps of the watched optimizer)
LOOP_FACTS = {"cnn_images": (4, 128), "char_rnn": (14, 250), "tiny_gpt": (24, 200),
              "regression_mlp": (0, 300), "frozen_backbone": (6, 150)}
REPEATS = 3  # overhead: runs of each script, watched and not


@contextlib.contextmanager
def patched_argv(argv: list[str]) -> Iterator[None]:
    """``sys.argv`` as the script's own command line would set it."""
    saved, sys.argv = sys.argv, argv
    try:
        yield
    finally:
        sys.argv = saved


def run_script(text: str, name: str, watched: bool, facts: tuple[int, int] | None) -> dict:
    """In a fresh worker: run one script (``name.py`` holding ``text``) with ``SEED``, watched
    or not; its wall time, and the alarms when watched."""
    torch.set_num_threads(1)
    for detector in sealed_detectors(list(DEFAULT_DETECTORS)):  # imported before the clock
        load_detector(detector)
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        script = Path(folder) / f"{name}.py"
        script.write_text(text)
        trace = Path(folder) / "trace"
        sink = io.StringIO()
        begun = time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            if watched:
                classes, steps = facts if facts else (None, None)
                code = run_watched([str(script), str(SEED)], {
                    "detectors": list(DEFAULT_DETECTORS), "trace": trace,
                    "num_classes": classes, "steps": steps, "stop": False})
            else:
                with patched_argv([str(script), str(SEED)]):
                    runpy.run_path(str(script), run_name="__main__")
                code = 0
        seconds = time.perf_counter() - begun
        row = {"seconds": seconds, "exit": code}
        if watched:
            alarms = (pd.read_csv(trace / ALARMS_FILE) if (trace / ALARMS_FILE).is_file()
                      else pd.DataFrame(columns=["detector", "step"]))
            row.update(alarms=len(alarms), alarmed=not alarms.empty,
                       first_alarm_step=alarms["step"].min() if len(alarms) else None,
                       detectors=",".join(sorted(set(alarms["detector"]))))
        return row


def jobs() -> list[dict]:
    """One watched run per script: both scripts of every valid exported pair, every loop."""
    valid = pd.read_csv(ROOT / "results" / "validity_exported.csv")
    models = {scenario.id: scenario.model for scenario in registry().values()}
    found = []
    for scenario in sorted(valid.loc[valid["valid"], "scenario"]):
        for variant, text in task_scripts(scenario).items():
            found.append({"kind": "exported", "scenario": scenario,
                          "model": models[scenario], "variant": variant, "text": text,
                          "facts": None})
    for name, facts in LOOP_FACTS.items():
        found.append({"kind": "clean loop", "scenario": name, "model": "", "variant": "clean",
                      "text": (LOOPS / f"{name}.py").read_text(), "facts": facts})
    return found


def measure(workers: int, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every watched run (a row each), and the overhead runs (watched and not, alternately)."""
    todo = jobs()
    first_fixed = {}
    for job in todo:
        if job["variant"] == "fixed":
            first_fixed.setdefault(job["model"], job)
    timed = [*first_fixed.values(), *(j for j in todo if j["kind"] == "clean loop")]
    overhead_jobs = [(job, watched) for _ in range(REPEATS) for job in timed
                     for watched in (False, True)]
    context = worker_context()
    with ProcessPoolExecutor(workers, mp_context=context, max_tasks_per_child=1) as pool:
        calls = [pool.submit(run_script, j["text"], j["scenario"].replace("-", "_"), True,
                             j["facts"]) for j in todo]
        timing = [pool.submit(run_script, j["text"], j["scenario"].replace("-", "_"), w,
                              j["facts"]) for j, w in overhead_jobs]
        bar = tqdm(total=len(calls) + len(timing), disable=not progress, unit="script")
        rows = []
        for job, call in zip(todo, calls, strict=True):
            rows.append({k: v for k, v in job.items() if k not in ("text", "facts")}
                        | call.result())
            bar.update()
        times = []
        for (job, watched), call in zip(overhead_jobs, timing, strict=True):
            times.append({"script": job["scenario"], "watched": watched,
                          "seconds": call.result()["seconds"]})
            bar.update()
        bar.close()
    return pd.DataFrame(rows), pd.DataFrame(times)


def board_rates(scenarios: list[str], detectors: list[str]) -> pd.DataFrame:
    """Per model, the published board's share of buggy runs and of control runs on which any
    of ``detectors`` alarmed (runs of ``scenarios``, the test split)."""
    outcomes = pd.read_parquet(ROOT / "results" / "outcomes.parquet")
    chosen = outcomes[outcomes["scenario"].isin(scenarios)
                      & outcomes["detector"].isin(detectors)
                      & outcomes["run_role"].isin(["buggy", "control"])]
    alarmed = chosen["outcome"].isin(["hit", "early", "false_alarm"])
    runs = (chosen.assign(alarmed=alarmed)
            .groupby(["model", "scenario", "seed", "run_role"])["alarmed"].any().reset_index())
    return runs.groupby(["model", "run_role"])["alarmed"].agg(["sum", "count"])


def rate(hits: int, n: int) -> str:
    share, lo, hi = clopper_pearson(int(hits), int(n))
    return f"{share:.2f} [{lo:.2f}, {hi:.2f}] ({int(hits)} of {int(n)})"


def report(rows: pd.DataFrame, times: pd.DataFrame, command: str) -> str:
    """The page: exported pairs beside the board, the clean loops, the overhead."""
    detectors = sealed_detectors(list(DEFAULT_DETECTORS))
    exported = rows[rows["kind"] == "exported"]
    board = board_rates(sorted(set(exported["scenario"])), detectors)
    table = []
    for model in [*sorted(set(exported["model"])), "all"]:
        mine = exported if model == "all" else exported[exported["model"] == model]
        buggy, fixed = mine[mine["variant"] == "buggy"], mine[mine["variant"] == "fixed"]
        theirs = board.groupby("run_role").sum() if model == "all" else (
            board.loc[model] if model in board.index.get_level_values(0) else None)
        row = {"model": model, "pairs": len(buggy),
               "watched: buggy scripts alarmed": rate(buggy["alarmed"].sum(), len(buggy)),
               "watched: fixed scripts alarmed": rate(fixed["alarmed"].sum(), len(fixed))}
        for role, label in (("buggy", "board: buggy runs"), ("control", "board: controls")):
            row[label] = ("–" if theirs is None or role not in theirs.index
                          else rate(theirs.loc[role, "sum"], theirs.loc[role, "count"]))
        table.append(row)
    loops = rows[rows["kind"] == "clean loop"][["scenario", "alarms", "first_alarm_step",
                                                "detectors"]]
    loops = loops.astype({"first_alarm_step": "Int64"}).astype(object).where(loops.notna(), "–").rename(columns={"scenario": "loop"})
    median = times.groupby(["script", "watched"])["seconds"].median().unstack()
    overhead = pd.DataFrame({"script": median.index, "unwatched s": median[False].round(2),
                             "watched s": median[True].round(2),
                             "ratio": (median[True] / median[False]).round(2)})
    by_detector = (exported[exported["alarmed"]].assign(
        detector=exported["detectors"].str.split(",")).explode("detector")
        .groupby(["detector", "variant"]).size().unstack(fill_value=0).reset_index())
    return "\n".join([
        "# Watching scripts bugzoo does not run", "",
        f"Regenerate with `{command}` (torch {torch.__version__}, one thread per script).", "",
        __doc__.split("\n\n", 1)[1].strip(), "",
        f"Detectors: the sealed built-ins ({', '.join(detectors)}). Seed {SEED} for every "
        "script. Rates with exact 95% Clopper-Pearson intervals, over scripts (one run of each "
        "pair's scripts, so over scenarios) for the watched columns, and over runs (three "
        "test-split seeds per scenario) for the board's. An alarm on a buggy script is counted "
        "whenever it came: a watched script has no declared onset to judge it against.", "",
        "## Exported pairs", "", markdown(pd.DataFrame(table)), "",
        "Scripts on which each detector alarmed:", "", markdown(by_detector), "",
        "## Clean loops written outside bugzoo", "", markdown(loops.reset_index(drop=True)), "",
        f"## Overhead (median of {REPEATS} runs each, watched and not, in the same pool)", "",
        markdown(overhead.reset_index(drop=True)), ""])


COMMAND = "bugzoo task watched"


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "results",
                   help="where watch.md, watch.csv and watch_times.csv go (default: results)")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--report-only", action="store_true",
                   help="measure nothing: write watch.md again from the CSVs in --out (the "
                        "board it sets them beside has moved)")
    args = p.parse_args(argv)
    out = ensure_writable(args.out)
    if args.report_only:
        if not (out / "watch.csv").is_file() or not (out / "watch_times.csv").is_file():
            raise UsageError(f"--report-only needs {out / 'watch.csv'} and watch_times.csv: "
                             f"run `{COMMAND}` once")
        rows, times = pd.read_csv(out / "watch.csv"), pd.read_csv(out / "watch_times.csv")
    else:
        rows, times = measure(args.workers, not args.no_progress)
        rows.to_csv(out / "watch.csv", index=False)
        times.to_csv(out / "watch_times.csv", index=False)
    (out / "watch.md").write_text(report(rows, times, COMMAND))
    print(f"wrote {out / 'watch.md'}")
    return 0

