"""The task set and the solvers scored on it.

``bugzoo task set --out DIR`` makes a task of every exportable scenario, under neutral ids
(``task-01``...) in a seeded order, into ``DIR/tasks`` with the keys in ``DIR/keys``. A task
joins the set only when the grader tells its buggy script from its fixed one by what they
train: the unchanged script's networks, measured on fresh data, must be worse than the fixed
script's beyond the margins. A buggy script that trains as good a network is no task, even where
the grader's check that a fix kept the task would refuse it unchanged (a layer of another kind).
The others are listed with why; ``results/tasks.md`` and ``results/tasks.csv`` hold both
lists.

``bugzoo task agents --set DIR`` runs each solver (:mod:`~bugzoo.teach.tasks.solvers`) on
every task of the set, grades it, and writes ``results/agents.md`` and ``results/agents.csv``.
Rates are over tasks (one task per scenario), each with a 95% Clopper-Pearson interval, and the
tasks solved are counted per model too.

With ``--changed`` both rerun only the rows whose key moved (:mod:`.carry`) and carry the
others from ``results/``. ``task set --changed`` numbers every task as a whole set would, but
writes the folders of the tasks it checks again only, so its set is for ``task agents
--changed``; a set to hand out is made without it.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from statistics import fmean

import pandas as pd

from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness import sandbox
from bugzoo.judge.stats import clopper_pearson
from bugzoo.judge.tables import markdown
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import exportable
from bugzoo.teach.tasks import health
from bugzoo.teach.tasks.carry import (
    SET,
    carried_sentence,
    grade_key,
    keyed_table,
    standing,
    task_key,
)
from bugzoo.teach.tasks.grade import Grade, confinement_note, grade
from bugzoo.teach.tasks.make import empty_folder, make_task
from bugzoo.teach.tasks.solvers import SOLVERS, noop

log = logging.getLogger(__name__)

RESULTS = Path("results")
SET_COLUMNS = ("in_set", "why_not", "unchanged_accuracy", "fixed_accuracy", "unchanged_loss",
               "fixed_loss")


def make_checked_task(scenario: str, task: Path, key: Path, seed: int) -> Grade:
    """Make the task (its evaluation seed drawn from ``seed`` and the scenario) and grade its
    unchanged script as a fix (:func:`is_task` reads the grade)."""
    make_task(scenario, task, key, eval_seed=random.Random(f"{seed}-{scenario}").randrange(2**31))
    with tempfile.TemporaryDirectory() as scratch:
        return grade(noop(task, key, Path(scratch) / "unchanged"), key)


def eval_seed(scenario: str, seed: int) -> int:
    """The evaluation seed a set drawn with ``seed`` gives ``scenario``'s task (as
    :func:`make_checked_task` draws it)."""
    return random.Random(f"{seed}-{scenario}").randrange(2**31)


def is_task(unchanged: Grade) -> bool:
    """Whether the unchanged script, graded as a fix, trains networks worse than the fixed
    script's beyond the margins (whether or not it kept the task)."""
    return not health.within_margins(unchanged.accuracy_p, unchanged.loss_p)


def build_set(out: Path, scenarios: list[str], seed: int,
              carried: pd.DataFrame | None = None) -> pd.DataFrame:
    """Make and check every task but those with a ``carried`` row, whose folders are made
    without checking them again (so that ``bugzoo task agents --changed`` can grade them);
    one row per scenario (the key side of the set), each with its key."""
    out = empty_folder(out, "task set folder")
    kept = (carried if carried is not None else pd.DataFrame(columns=["scenario"])
            ).set_index("scenario")
    order = sorted(scenarios)
    random.Random(seed).shuffle(order)
    rows = []
    for number, scenario in enumerate(order, 1):
        task_id = f"task-{number:02d}"
        task, key = out / "tasks" / task_id, out / "keys" / task_id
        if scenario in kept.index:
            rows.append({"task": task_id, "scenario": scenario, "carried": True,
                         **kept.loc[scenario, list(SET_COLUMNS)].to_dict()})
            if rows[-1]["in_set"]:
                make_task(scenario, task, key, eval_seed=eval_seed(scenario, seed))
            continue
        log.info("%s/%s: %s", number, len(order), task_id)
        unchanged = make_checked_task(scenario, task, key, seed)
        in_set = is_task(unchanged)
        rows.append({"task": task_id, "scenario": scenario, "carried": False, "in_set": in_set,
                     "why_not": "" if in_set else "the grader cannot tell the unchanged script "
                                                  "from the fixed one on fresh data",
                     "unchanged_accuracy": fmean(unchanged.accuracy),
                     "fixed_accuracy": fmean(unchanged.fixed_accuracy),
                     "unchanged_loss": fmean(unchanged.loss),
                     "fixed_loss": fmean(unchanged.fixed_loss)})
        if not in_set:  # not a task: out of the set, its key kept for the record
            shutil.rmtree(task)
    index = pd.DataFrame(rows).astype({"in_set": bool})
    index["key"] = [set_key(scenario, seed) for scenario in index["scenario"]]
    (out / "keys").mkdir(parents=True, exist_ok=True)
    index.to_csv(out / "keys" / "index.csv", index=False)
    return index


def set_key(scenario: str, seed: int) -> str:
    return task_key(scenario, SET, seed)


def carried_set_rows(results: Path, scenarios: list[str], seed: int) -> pd.DataFrame:
    """The rows of ``results/tasks.csv`` for ``scenarios`` whose key is today's."""
    table = keyed_table(results / "tasks.csv", "bugzoo task set --out DIR")
    return standing(table, {scenario: set_key(scenario, seed) for scenario in scenarios})


def set_table(index: pd.DataFrame) -> pd.DataFrame:
    """``results/tasks.csv``: the set's rows by scenario, without the set's own numbering."""
    return index.sort_values("scenario", ignore_index=True)[
        ["scenario", *SET_COLUMNS, "key"]]


def set_tables(index: pd.DataFrame, command: str) -> str:
    carried = int(index["carried"].sum())
    shown = index.sort_values("scenario")[["scenario", "in_set", "unchanged_accuracy",
                                           "fixed_accuracy", "unchanged_loss", "fixed_loss",
                                           "why_not"]].round(3)
    return (f"# The find-and-fix task set\n\nRegenerate with `{command}`. Every exportable "
            "scenario (`bugzoo export --list`) made into a task; a task is in the set when the "
            "grader tells its buggy script from its fixed one, i.e. the networks the unchanged "
            "script trains, measured on fresh data, are worse than the fixed script's beyond "
            "the margins (`bugzoo/teach/tasks/health.py`). "
            "Outcomes are means over the grader's 5 seeds on fresh data."
            + (" " + carried_sentence(f"{carried} rows were", "their scripts and the code "
                                      "that grades them are unchanged since they were checked")
               if carried else "") + "\n\n"
            f"**{int(index['in_set'].sum())} of {len(index)} exportable scenarios are tasks.**"
            f"\n\n{markdown(shown)}\n")


def score_solvers(root: Path, solvers: list[str], carried: pd.DataFrame | None = None
                  ) -> pd.DataFrame:
    """Each solver on every task of the set at ``root``: one row per (solver, task), each with
    its key. A ``carried`` row whose key is today's stands for its (solver, scenario), under
    the task id the set gives its scenario now."""
    index = pd.read_csv(root / "keys" / "index.csv")
    index = index[index["in_set"]]
    kept = {} if carried is None else {(row["solver"], row["scenario"]): row
                                       for row in carried.to_dict("records")}
    rows = []
    for solver in solvers:
        for task_id, scenario, set_row_key in index[["task", "scenario", "key"]].values:
            row_key = grade_key(set_row_key, get_scenario(scenario).model, solver)
            if (old := kept.get((solver, scenario))) is not None and old["key"] == row_key:
                rows.append({**old, "task": task_id})
                continue
            if not (root / "tasks" / task_id).is_dir():
                raise UsageError(f"{root} has no folder for {task_id} ({scenario}), whose "
                                 f"{solver} row is not carried: make the set again with "
                                 "`bugzoo task set --out DIR` (--changed writes it too)")
            key, submission = root / "keys" / task_id, root / "submissions" / solver / task_id
            if submission.exists():
                shutil.rmtree(submission)
            SOLVERS[solver](root / "tasks" / task_id, key, submission)
            result = grade(submission, key)
            (submission / "grade.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
            log.info("%s %s: %s", solver, task_id, result.line())
            rows.append({"solver": solver, "task": task_id, "model": get_scenario(scenario).model,
                         "diagnosed": result.diagnosed,
                         "kept_task": result.kept_task, "healthy": result.healthy,
                         "solved": result.solved, "scenario": scenario, "key": row_key})
    return pd.DataFrame(rows)


def agents_tables(grades: pd.DataFrame, command: str, carried: int = 0) -> str:
    rows = []
    for solver, group in grades.groupby("solver", sort=False):
        row = {"solver": solver, "tasks": len(group)}
        for column in ("diagnosed", "healthy", "solved"):
            rate, lo, hi = clopper_pearson(int(group[column].sum()), len(group))
            row[column] = f"{rate:.2f} [{lo:.2f}, {hi:.2f}]"
        rows.append(row)
    by_model = grades.groupby(["solver", "model"], sort=False)["solved"].agg(["sum", "count"])
    by_model = (by_model["sum"].astype(str) + " of " + by_model["count"].astype(str)).unstack()
    by_model = by_model[sorted(by_model.columns)]
    return (f"# Solvers on the find-and-fix tasks\n\nRegenerate with `{command}`. Each solver "
            "hands in a patched `train.py` and an `answer.json` per task of the set "
            "(`results/tasks.md`); `bugzoo task grade` retrains it over 5 seeds and measures "
            "the trained model on fresh data. *diagnosed*: the category is the bug's; "
            "*healthy*: the fix kept the task and is not worse than the key's fixed script "
            "beyond the margins; *solved*: both. Rates over tasks with 95% Clopper-Pearson "
            "intervals.\n\n"
            "* `noop` hands the script back unchanged with category `none`: it must score 0.\n"
            "* `oracle` hands in the key's fixed script and category: it must score 1, so a "
            "miss is a grader or export bug.\n"
            "* `oracle_variant` hands in the key's fix with a harmless change on top (a "
            "healthy variant of the script: batch size, optimizer, width, clipping or dropout, "
            "chosen by the task's scenario): it should score about 1, or the margins are too "
            "tight, or a change is not harmless in the task's setting (`results/harmless.md` "
            "asks the grader's test of each change on each model's clean script).\n"
            "* `rules` runs the task's script once with bugzoo's heuristic detectors watching its "
            "loop, takes the category of the earliest alarm as its diagnosis and applies the "
            "known fixes filed under it (`bugzoo/teach/tasks/rules.py`). The table was written "
            "knowing the catalogue's mistakes: its figure is what such rules reach at best.\n"
            "* `key_reader` and `template_reader` are cheats, given the key's category so that "
            "only the grader's sealing stands in their way (`bugzoo/teach/tasks/cheats.py`): "
            "one searches the set's folder for its task's key and runs `fixed.py`, the other "
            "imports bugzoo and runs the template's fixed script. Each must score 0.\n\n"
            f"Grading: {confinement_note(sandbox.confinement())}.\n\n"
            + (carried_sentence(f"{carried} of the {len(grades)} grades were", "the task's "
                                "scripts and the code that solves and grades them are unchanged "
                                "since they were graded") + "\n\n" if carried else "")
            + f"{markdown(pd.DataFrame(rows))}\n\nSolved, by the task's model:\n\n"
            f"{markdown(by_model.reset_index())}\n")


def set_main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task set", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="new folder for tasks/ and keys/")
    p.add_argument("--scenarios", nargs="+", help="exportable scenarios (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seeds the task order and eval seeds")
    p.add_argument("--results", type=Path, default=RESULTS,
                   help="where tasks.md and tasks.csv go")
    p.add_argument("--changed", action="store_true", help="check only the tasks whose scripts "
                   "or grading code changed; carry the others' rows from --results' tasks.csv "
                   "(their folders are written unchecked, for `bugzoo task agents --changed`)")
    args = p.parse_args(argv)
    scenarios = exportable(args.scenarios)
    carried = (carried_set_rows(args.results, scenarios, args.seed) if args.changed else None)
    index = build_set(args.out, scenarios, args.seed, carried)
    args.results.mkdir(parents=True, exist_ok=True)
    set_table(index).to_csv(args.results / "tasks.csv", index=False)
    (args.results / "tasks.md").write_text(set_tables(index, command_line("task set", argv)))
    print(f"{int(index['in_set'].sum())} of {len(index)} scenarios are tasks -> {args.out}; "
          f"{args.results / 'tasks.md'}")
    return 0


def agents_main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task agents", description="Score reference solvers on a "
                       "task set (results/agents.md).")
    p.add_argument("--set", type=Path, required=True, help="a folder made by bugzoo task set")
    p.add_argument("--solvers", nargs="+", default=list(SOLVERS), help="default: all")
    p.add_argument("--results", type=Path, default=RESULTS,
                   help="where agents.md and agents.csv go")
    p.add_argument("--changed", action="store_true", help="grade only the (solver, task) pairs "
                   "whose scripts or code changed; carry the others from --results' agents.csv")
    args = p.parse_args(argv)
    index = args.set / "keys" / "index.csv"
    if not index.is_file():
        raise UsageError(f"{args.set} is not a task set (no keys/index.csv)")
    if "key" not in pd.read_csv(index, nrows=0):
        raise UsageError(f"{args.set} was made before task sets had keys: make it again with "
                         "`bugzoo task set --out DIR`")
    for solver in args.solvers:
        if solver not in SOLVERS:
            raise unknown_choice("solver", solver, SOLVERS)
    carried = (keyed_table(args.results / "agents.csv", "bugzoo task agents --set DIR")
               if args.changed else None)
    grades = score_solvers(args.set, args.solvers, carried)
    args.results.mkdir(parents=True, exist_ok=True)
    grades.to_csv(args.results / "agents.csv", index=False)
    kept = 0 if carried is None else int(grades["key"].isin(set(carried["key"])).sum())
    (args.results / "agents.md").write_text(agents_tables(
        grades, command_line("task agents", argv), kept))
    print((args.results / "agents.md").read_text())
    return 0
