"""``bugzoo results perf changed``: what the ``--changed`` commands would redo after a typical edit.

Each edit of :data:`EDITS` is made in a scratch copy of a checkout (this one, or ``--before``
another, such as the last release's), and every key of the committed results is computed
there and in an unedited copy, in a fresh interpreter each. A moved key is a result that
``bugzoo results traces export --keep-unchanged``, ``bugzoo results validate --changed`` or ``bugzoo task
... --changed`` would make again. Seconds are estimated from the run times the published dev
traces recorded: a dev run at its own ``wall_s``, a validity row at its scenario's mean run
time for the 5 buggy and 5 control runs it trains (a health row: 5 runs).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from bugzoo.judge.committed_keys import DECIDING, RESULTS, collect
from bugzoo.paths import PACKAGE

CHECKOUT = PACKAGE.parent
# (what a maintainer does, the file, the text replaced, its replacement)
EDITS = (
    ("a comment and a docstring in telemetry.py", "bugzoo/telemetry.py",
     "def heap_mb() -> float:\n", "def heap_mb() -> float:\n    # measured once per step\n"),
    ("a bug's docstring (double_softmax)", "bugzoo/bugs/double_softmax.py", '"""',
     '"""Reworded. '),
    ("an export delta's text (double_softmax)", "bugzoo/bugs/double_softmax.py",
     '"return torch.softmax(self.head(self.backbone(x)), dim=-1)"',
     '"return self.head(self.backbone(x)).softmax(-1)"'),
    ("behaviour in harness/record.py summarize", "bugzoo/harness/record.py",
     '"steps_completed": int(len(trace)),', '"steps_completed": int(len(trace)) + 0,'),
    ("one solver (oracle)", "bugzoo/teach/tasks/solvers.py",
     '"explanation": answer["title"]})', '"explanation": answer["title"] + ""})'),
    ("one detector (loss_plateau)", "detectors/loss_plateau.py", "\nfrom ", "\nimport os\nfrom "),
    ("a sweep's bookkeeping in harness/store.py (add_sweep_time)", "bugzoo/harness/store.py",
     '"wall_s": round(wall_s, 1)', '"wall_s": round(wall_s, 3)'),
)
def checkout_name(tree: Path) -> str:
    """The commit a checkout is at (its folder's name where git cannot tell)."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else tree.name


def edited_copy(source: Path, scratch: Path, edit: tuple[str, str, str] | None) -> Path:
    """A copy of the checkout at ``source`` (what decides keys), with ``edit`` made."""
    tree = scratch / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for name in DECIDING:
        if (source / name).is_dir():
            shutil.copytree(source / name, tree / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif (source / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, tree / name)
    if edit is not None:
        path, old, new = edit
        text = (tree / path).read_text()
        if old not in text:
            raise ValueError(f"{path} has no {old!r} to edit")
        (tree / path).write_text(text.replace(old, new, 1))
    return tree


def costs(before: dict, after: dict) -> dict:
    """What moved between two collections, with the seconds the moved runs cost."""
    runs = pd.read_parquet(RESULTS / "traces" / "runs.parquet", columns=["scenario", "wall_s"])
    mean_s = runs.groupby("scenario")["wall_s"].mean()
    moved_runs = {s for s, key in after["runs"].items() if before["runs"].get(s) != key}
    validity = pd.read_csv(RESULTS / "validity.csv", usecols=["scenario", "control"])
    health = pd.read_csv(RESULTS / "health.csv", usecols=["scenario"])
    moved_rows = [i for i, (a, b) in enumerate(zip(before["validity"], after["validity"],
                                                   strict=True)) if a != b]
    moved_health = [i for i, (a, b) in enumerate(zip(before["health"], after["health"],
                                                     strict=True)) if a != b]
    validity_s = sum(5 * (mean_s.get(validity.scenario[i], 0.0) +
                          mean_s.get(validity.control[i], 0.0)) for i in moved_rows)
    validity_s += sum(5 * mean_s.get(health.scenario[i], 0.0) for i in moved_health)

    def moved(kind: str) -> int:
        return sum(a != b for a, b in zip(before[kind], after[kind], strict=True))

    return {"scenarios_rerun": len(moved_runs),
            "dev_runs_retrained": int(runs["scenario"].isin(moved_runs).sum()),
            "dev_run_s": round(float(runs.loc[runs["scenario"].isin(moved_runs),
                                              "wall_s"].sum())),
            "validity_rows_rerun": len(moved_rows) + len(moved_health),
            "validity_run_s": round(validity_s),
            "exported_pairs_rerun": moved("pairs"), "task_rows_rerun": moved("tasks"),
            "grades_rerun": moved("grades")}


def changed_cost(trees: dict[str, Path], progress: bool = True) -> pd.DataFrame:
    """One row per (key scheme, edit): what each ``--changed`` command would redo."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bugzoo-changed-") as scratch:
        for scheme, source in trees.items():
            base = collect(edited_copy(source, Path(scratch), None))
            for label, *edit in EDITS:
                if progress:
                    print(f"{scheme}: {label}", file=sys.stderr)
                after = collect(edited_copy(source, Path(scratch), tuple(edit)))
                rows.append({"keys": scheme, "edit": label, **costs(base, after)})
    return pd.DataFrame(rows)
