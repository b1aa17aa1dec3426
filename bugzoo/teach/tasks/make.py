"""``bugzoo task make <scenario> --out DIR --key KEYDIR``: a find-and-fix task and its answer key.

The task folder holds what a person (or an agent) would have in front of them: ``train.py``,
the buggy script with neutral names and comments; ``REPORT.md``, what its run showed beside
last month's working version, in a user's words; ``curves.png`` and ``trace.csv``, the run's
per-step training loss and gradient norm. Nothing in it names the bug. The key folder holds
the answer (``key.json``: the bug, its category, the grader's seeds and its secret evaluation
seed) and the fixed script, ``fixed.py``.
"""

from __future__ import annotations

import json
import math
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import get_bug, list_bugs
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.scenarios import get_scenario
from bugzoo.teach.catalogue import OUTCOME_WORDS
from bugzoo.teach.export import supported
from bugzoo.teach.tasks.runner import Trained, trained_runs
from bugzoo.teach.tasks.script import family, settings, task_scripts

GRADE_SEEDS = (0, 1, 2, 3, 4)
# what REPORT.md shows for every task, in the same order: outcomes a practitioner looks at
REPORTED = ("final_val_loss", "final_val_acc", "initial_loss", "val_holdout_gap", "nonfinite")


def categories() -> list[str]:
    """The categories an answer chooses from: the catalogue's, and ``none``."""
    return sorted({bug.category for bug in list_bugs()} | {"none"})


def empty_folder(path: Path, what: str) -> Path:
    """``path``, created, if it is new or empty; a usage error if it holds anything (a task
    never overwrites)."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError(f"{what} {path} is not empty: give a new folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {path} ({e.strerror or e})") from None
    return path


def first_runs(buggy: Path, fixed: Path, logs: Path) -> tuple[Trained, Trained]:
    """Seed 0 of both scripts, side by side (a run kept in the cache is read, and logs nothing)."""
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda pair: trained_runs(*pair)[0],
                              ((buggy, [0], logs / "buggy.log"), (fixed, [0], logs / "fixed.log"))))
    return found[0], found[1]


def report(description: str, source: str, metric: str, now: Trained, before: Trained) -> str:
    """REPORT.md: the run's outcomes beside last month's, the declared one first; ``source``
    names the script's global that holds its data source."""
    def shown(value: float | None) -> str:
        return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"
    headline = (f"The {OUTCOME_WORDS[metric]} is **{shown(now.observed.get(metric))}**; last "
                f"month's version of this script reached "
                f"**{shown(before.observed.get(metric))}**.")
    rows = [f"| {OUTCOME_WORDS[key]}{' (1 = yes)' if key == 'nonfinite' else ''} | "
            f"{shown(now.observed.get(key))} | {shown(before.observed.get(key))} |"
            for key in REPORTED]
    crashed = f"\n\nThe run stopped with an error: `{now.error}`." if now.error else ""
    return f"""# Training report

`train.py` trains {description}. Last month it worked; this month's version trains worse.
Seed 0 of both versions (`python train.py 0`):

{headline}{crashed}

| what we measured | this version | last month's |
|---|---|---|
{chr(10).join(rows)}

![training loss and gradient norm of this version](curves.png)

`trace.csv` holds this version's training loss and gradient norm at every step.

## Your job

Find the mistake in `train.py` and fix it. Hand in a folder with your patched `train.py` and
an `answer.json`:

    {{"category": "...", "bug": "optional: a short name", "explanation": "one line"}}

`category` is one of: {", ".join(categories())}.

The grader retrains your `train.py` over several seeds and evaluates the network it leaves in
`model` on fresh data it makes itself; what the script prints does not count. Keep the task:
the same data source (`{source}` and how examples are drawn from it), no more optimizer steps
than the working version takes, the same kinds of layers, and the trained network named `model`.
"""


def draw(trained: Trained, png: Path) -> None:
    figure = Figure(figsize=(8, 3), layout="constrained")
    for ax, (values, label) in zip(figure.subplots(1, 2), ((trained.losses, "training loss"),
                                                           (trained.grad_norms, "gradient norm")),
                                   strict=True):
        ax.plot(range(1, len(values) + 1), values, lw=1)
        ax.set(xlabel="step", title=label, yscale="log" if min(values, default=0) > 0 else
               "linear")
    figure.savefig(png, dpi=100)


def make_task(scenario: str, out: Path, key: Path, eval_seed: int | None = None) -> None:
    """Write the task folder ``out`` and the answer key ``key`` of an exportable scenario."""
    spec = get_scenario(scenario)
    if scenario not in supported():
        raise UsageError(f"scenario '{scenario}' cannot become a task: it has no standalone "
                         f"script (`bugzoo export --list` names the ones that do)")
    out, key = empty_folder(out, "task folder"), empty_folder(key, "key folder")
    scripts, bug = task_scripts(scenario), get_bug(spec.bug)
    (out / "train.py").write_text(scripts["buggy"])
    (key / "fixed.py").write_text(scripts["fixed"])
    now, before = first_runs(out / "train.py", key / "fixed.py", key)
    if before.error:
        raise RuntimeError(f"{scenario}'s fixed task script failed: {before.error} "
                           f"(its log: {key / 'fixed.log'})")
    draw(now, out / "curves.png")
    pd.DataFrame({"step": range(1, len(now.losses) + 1), "loss": now.losses,
                  "grad_norm": now.grad_norms + [math.nan] * (len(now.losses) - len(
                      now.grad_norms))}).to_csv(out / "trace.csv", index=False)
    task = family(scenario)
    (out / "REPORT.md").write_text(report(task.DESCRIPTION, task.SOURCE, bug.check.metric, now,
                                          before))
    answer = {"scenario": scenario, "bug": bug.id, "category": bug.category, "title": bug.title,
              "model": spec.model, "settings": settings(scenario), "seeds": list(GRADE_SEEDS),
              "eval_seed": secrets.randbelow(2**31) if eval_seed is None else eval_seed}
    (key / "key.json").write_text(json.dumps(answer, indent=1) + "\n")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task make", description=__doc__.splitlines()[0])
    p.add_argument("scenario", help="an exportable scenario (bugzoo export --list)")
    p.add_argument("--out", type=Path, required=True, help="the task folder (new or empty)")
    p.add_argument("--key", type=Path, required=True, help="the answer key's folder (new or "
                   "empty; keep it away from whoever does the task)")
    args = p.parse_args(argv)
    make_task(args.scenario, args.out, args.key)
    print(f"task in {args.out}, its key in {args.key}")
    return 0
