"""``bugzoo interview --n 3 --seed S --out DIR``: a candidate pack and an interviewer key.

``DIR/candidate/`` is what the candidate gets: a README with the time limit and the tasks in
order of difficulty, and one task folder each (:mod:`~bugzoo.teach.tasks.make`).
``DIR/interviewer/`` is the key: per task the answer, the hint ladder (symptom, curve, code
region, answer) and the command that grades the candidate's submission by retraining.

A task's difficulty comes from the committed reference board (``results/leaderboard_bugs.csv``):
how many of bugzoo's own heuristic detectors catch the bug in most of its runs, and how soon.
Only scenarios the grader can tell from their fix become tasks (the unchanged script must train
worse networks than the fix), as in ``bugzoo task set``.
"""

from __future__ import annotations

import difflib
import json
import logging
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bugzoo.detector_registry import select_detectors
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.teach.export import supported
from bugzoo.teach.tasks.make import empty_folder
from bugzoo.teach.tasks.taskset import is_task, make_checked_task

log = logging.getLogger(__name__)

BOARD = Path("results/leaderboard_bugs.csv")
WATCHED = Path("results/watch.csv")  # one run of each exported task script, timed
CAUGHT = 0.5  # a detector catches a bug when it alarms in at least half of the bug's runs
EARLY_STEPS = 50  # caught within this many steps of the onset: the symptom shows early
LEVELS = ("easy", "medium", "hard")
MINUTES_PER_TASK = 20


@dataclass(frozen=True)
class Difficulty:
    level: str
    catching: int  # bugzoo's heuristic detectors that catch it
    fastest_steps: float | None  # the soonest median delay among them


def difficulty(bug: str, board: pd.DataFrame | None) -> Difficulty:
    """``hard`` when none of the heuristic detectors catches the bug; ``easy`` when three or
    more do and one within ``EARLY_STEPS``; ``medium`` otherwise (or with no board at hand)."""
    if board is None:
        return Difficulty("medium", 0, None)
    heuristics = set(select_detectors(["builtins"]))
    rows = board[(board["bug"] == bug) & board["detector"].isin(heuristics)]
    caught = rows[rows["hits"] >= CAUGHT * rows["runs"]]
    fastest = caught["median_delay_steps"].min() if len(caught) else None
    if not len(caught):
        level = "hard"
    elif len(caught) >= 3 and fastest is not None and fastest <= EARLY_STEPS:
        level = "easy"
    else:
        level = "medium"
    return Difficulty(level, len(caught), None if fastest is None or pd.isna(fastest)
                      else float(fastest))


def code_region(buggy: str, fixed: str) -> str:
    """Where the scripts differ, as lines of ``train.py`` with the function or class around them,
    without showing the change."""
    lines = buggy.splitlines()
    spots = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, lines, fixed.splitlines()
                                                      ).get_opcodes():
        if tag != "equal":
            where = f"line {i1 + 1}" if i2 <= i1 + 1 else f"lines {i1 + 1}-{i2}"
            spots.append(f"{where} ({_enclosing(lines, min(i1, len(lines) - 1))})")
    return "; ".join(spots)


def _enclosing(lines: list[str], index: int) -> str:
    """The innermost ``def`` or ``class`` around line ``index``, or the module level."""
    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())
    level = indent(lines[index])
    for line in reversed(lines[:index]):
        if not line.strip() or indent(line) >= level:
            continue
        level = indent(line)
        if line.lstrip().startswith(("def ", "class ")):
            return f"in `{line.split()[1].split('(')[0].rstrip(':')}`"
        if level == 0:
            break
    return "at module level"


def hints(task: Path, key: Path) -> list[str]:
    """The ladder: symptom, curve, code region, answer."""
    answer = json.loads((key / "key.json").read_text())
    report = (task / "REPORT.md").read_text().split("\n\n")
    symptom = next(p for p in report if p.startswith("The "))
    region = code_region((task / "train.py").read_text(), (key / "fixed.py").read_text())
    return [f"Symptom: {symptom}",
            "Curve: look at `curves.png`; compare the training loss with what a working run "
            "of this task would do, and ask when the run stopped improving.",
            f"Code region: the mistake is in {region} of `train.py`.",
            f"Answer: {answer['title']} (category `{answer['category']}`, bug "
            f"`{answer['bug']}`). The fixed script is `fixed.py` beside this key."]


def pick(n: int, seed: int, root: Path) -> list[tuple[str, Path, Path]]:
    """``n`` tasks in a seeded order, each made and kept only if the grader can tell it from its
    fix."""
    order = supported()
    random.Random(seed).shuffle(order)
    kept = []
    for scenario in order:
        if len(kept) == n:
            break
        name = f"task-{len(kept) + 1}"
        task, key = root / "candidate" / name, root / "interviewer" / name
        if not is_task(make_checked_task(scenario, task, key, seed)):
            log.info("%s: the grader cannot tell it from its fix; another one", scenario)
            shutil.rmtree(task)
            shutil.rmtree(key)
            continue
        kept.append((scenario, task, key))
    return kept


def run_seconds() -> dict[str, float]:
    """Seconds one run of each scenario's task script took (``results/watch.csv``: the buggy
    script, once, one thread), at least 1; empty without that file."""
    if not WATCHED.is_file():
        return {}
    table = pd.read_csv(WATCHED)
    runs = table[(table["kind"] == "exported") & (table["variant"] == "buggy")]
    return {row.scenario: max(1.0, row.seconds) for row in runs.itertuples()}


def interview(n: int, seed: int, out: Path, minutes: int) -> Path:
    root = empty_folder(out, "interview folder")
    board = pd.read_csv(BOARD) if BOARD.is_file() else None
    tasks = pick(n, seed, root)
    levels = {scenario: difficulty(json.loads((key / "key.json").read_text())["bug"], board)
              for scenario, _, key in tasks}
    runs = run_seconds()
    rows = [f"| `{task.name}/` | {levels[scenario].level} | "
            f"{f'{runs[scenario]:.0f} s' if scenario in runs else '–'} |" for scenario, task, _ in
            sorted(tasks, key=lambda chosen: LEVELS.index(levels[chosen[0]].level))]
    (root / "candidate" / "README.md").write_text(f"""# Debugging interview

You have **{minutes} minutes** for {len(tasks)} tasks, listed easiest first. Each folder holds a small PyTorch
training script that used to work and now trains worse, and `REPORT.md`, what its run showed.
For each task: find the mistake, fix `train.py`, and write `answer.json` beside it:

    {{"category": "...", "bug": "optional: a short name", "explanation": "one line"}}

(`REPORT.md` lists the categories.) Run a script with `python train.py [SEED]`; it needs only
PyTorch. The table says how long one run took on one thread of a 2-core machine (at least 1 s;
yours may differ). You may ask for a hint at any time; each costs a little.

| task | difficulty | one run |
|---|---|---|
{chr(10).join(rows)}

Hand in each task as a folder with your `train.py` and `answer.json`. Your fix is graded by
retraining it and measuring the model it trains on fresh data, so printing better numbers does
not help; keep the data source, the number of steps and the kinds of layers.
""")
    sections = []
    for scenario, task, key in tasks:
        level = levels[scenario]
        ladder = "\n".join(f"{i}. {h}" for i, h in enumerate(hints(task, key), 1))
        caught = (f"{level.catching} of bugzoo's heuristic detectors catch it"
                  + (f", the soonest {level.fastest_steps:.0f} step(s) after it starts"
                     if level.fastest_steps is not None else ""))
        sections.append(f"""## {task.name}: {level.level} ({caught})

Scenario `{scenario}`. Hints, in order:

{ladder}

Grade a submission folder SUB (its `train.py` and `answer.json`):

    bugzoo task grade {task} --submission SUB --key {key}
""")
    (root / "interviewer" / "README.md").write_text(
        f"# Interviewer's key\n\nKeep this folder from the candidate. Time limit: {minutes} "
        f"minutes. Give hints one rung at a time.\n\n" + "\n".join(sections))
    return root


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo interview", description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=3, help="how many tasks (default 3)")
    p.add_argument("--seed", type=int, default=0, help="which tasks (default 0)")
    p.add_argument("--out", type=Path, required=True, help="new folder for the pack")
    p.add_argument("--minutes", type=int, help=f"time limit (default {MINUTES_PER_TASK} a task)")
    args = p.parse_args(argv)
    if not 1 <= args.n <= len(supported()):
        raise UsageError(f"--n must be between 1 and {len(supported())}")
    root = interview(args.n, args.seed, args.out, args.minutes or MINUTES_PER_TASK * args.n)
    print(f"candidate pack: {root / 'candidate'}; interviewer key: {root / 'interviewer'}")
    return 0
