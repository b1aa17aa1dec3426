"""Rows of the task tables that still stand, for the ``--changed`` runs of ``bugzoo task
validate``, ``task set`` and ``task agents``.

A row's key hashes what decided it: the scenario's two task scripts (each a whole program), the
bug's symptom check, and the code that trains, grades and solves them. That code is the task
runner, grader, health test and solvers, the scenario's reproducer family (its fresh data,
pipelines and healthy variants) with the text the families share, and the built-in detectors
the ``rules`` solver runs. Where a row's key is today's, the same programs and code made it, so
a rerun would measure it again; the other rows are rerun. A new export delta moves only its own
scenario's key, and a change to one family only its model's keys, so new exports cost their
own runs, not the whole set's.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from bugzoo.bugs import get_bug
from bugzoo.errors import UsageError
from bugzoo.judge.out_of_sample import detectors_digest
from bugzoo.release import file_hash, key_of
from bugzoo.scenarios import get_scenario
from bugzoo.teach.tasks.script import task_scripts

TASKS = Path(__file__).resolve().parent
# the modules of bugzoo.teach.tasks whose code decides a row (the others format or serve it)
DECIDING = ("runner", "grade", "health", "make", "script", "solvers", "rules")


@cache
def code_digest(model: str) -> str:
    """One hash of the code that trains, grades and solves ``model``'s task scripts."""
    reproducers = TASKS.parent / "reproducers"  # their __init__ holds a docstring only
    families = (reproducers / name for name in ("_shared.py", f"{model}.py"))
    return key_of(file_hash(*(TASKS / f"{name}.py" for name in DECIDING), *families),
                  detectors_digest())


@cache
def scenario_part(scenario: str) -> str:
    """The part of a row's key that ``scenario`` decides: its task scripts, its bug's check and
    its model's code digest (rendering the scripts is the slow part, so it is done once)."""
    spec = get_scenario(scenario)
    check = get_bug(spec.bug).check
    return key_of(task_scripts(scenario), check.metric, check.direction, code_digest(spec.model))


def task_key(scenario: str, *parts: object) -> str:
    """The key of a row about ``scenario``; ``parts`` name what else decided it (the seeds, the
    set's seed, the solver)."""
    return key_of(scenario_part(scenario), list(parts))


def keyed_table(path: Path, command: str) -> pd.DataFrame:
    """The table at ``path``, which must have a ``key`` column; ``command`` is the full run that
    writes one."""
    if not path.is_file():
        raise UsageError(f"--changed needs {path}, which does not exist: run `{command}` once")
    table = pd.read_csv(path, dtype={"why_not": str, "key": str})
    if "why_not" in table:  # an empty reason reads back as empty, not as a missing value
        table["why_not"] = table["why_not"].fillna("")
    if "key" not in table:
        raise UsageError(f"{path} has no key column (written before --changed existed): run "
                         f"`{command}` once")
    return table


def standing(table: pd.DataFrame, keys: dict[str, str], by: str = "scenario") -> pd.DataFrame:
    """The rows of ``table`` whose ``by`` value has today's key in ``keys`` (rows of ids not in
    ``keys`` are dropped)."""
    return table[table[by].map(keys).eq(table["key"])].reset_index(drop=True)


def carried_sentence(rows: str, why: str) -> str:
    """What a results page says of the rows ``--changed`` carried: ``rows`` (how many of what)
    and ``why`` they still stand."""
    return f"{rows} carried from the table this run replaced: {why} (`--changed`)."
