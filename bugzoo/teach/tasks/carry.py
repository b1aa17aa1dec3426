"""Rows of the task tables that still stand, for the ``--changed`` runs of ``bugzoo task
validate``, ``task set`` and ``task agents``.

A row's key hashes what decided it: the scenario's two task scripts (each a whole program), the
bug's symptom check, and the code its kind of row runs (:mod:`bugzoo.provenance`), found from
that kind's entry point, with the model's reproducer family (imported by name): ``task
validate`` runs the pairs and tests them, ``task set`` makes and grades the tasks, and an agent
grade runs its own solver and the grader, with the built-in detectors where the solver runs
detectors. Where a row's key is today's, the same programs and code made it, so a rerun would
measure it again; the other rows are rerun. A new export delta moves only its own scenario's
key, a change to one family only its model's keys, a change to one solver only its grades.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from bugzoo.bugs import get_bug
from bugzoo.errors import UsageError
from bugzoo.judge.out_of_sample import detectors_digest
from bugzoo.provenance import code_key, code_reached, key_of
from bugzoo.scenarios import get_scenario
from bugzoo.teach.tasks.script import task_scripts
from bugzoo.teach.tasks.solvers import SOLVER_INPUTS, SOLVERS

# where each kind of row starts: the code reached from there decides it
VALIDATE = ("bugzoo.teach.tasks.exported:validate_exports",)
SET = ("bugzoo.teach.tasks.taskset:make_checked_task", "bugzoo.teach.tasks.taskset:is_task")
GRADE = "bugzoo.teach.tasks.grade:grade"
RUNS_DETECTORS = ("bugzoo.detector_registry", "select_detectors")


def code_digest(model: str, *entries: str) -> str:
    """The key of the code reached from ``entries`` with ``model``'s reproducer family; the
    built-in detectors' text joins it where that code runs detectors."""
    family = f"bugzoo.teach.reproducers.{model}"
    runs_detectors = RUNS_DETECTORS in code_reached(*entries)
    return key_of(code_key(*entries, family), detectors_digest() if runs_detectors else None)


def grade_key(set_row_key: str, model: str, solver: str) -> str:
    """The key of ``solver``'s grade on a task whose set row has ``set_row_key``: that task,
    the solver's own code (where it is defined) and the grader's, and what else the solver
    reads for ``model`` (:data:`~.solvers.SOLVER_INPUTS`)."""
    function = SOLVERS[solver]
    inputs = [SOLVER_INPUTS[solver](model)] if solver in SOLVER_INPUTS else []
    return key_of(set_row_key, solver, _code(model, (f"{function.__module__}:"
                                                     f"{function.__name__}", GRADE)), *inputs)


@cache
def scenario_part(scenario: str) -> str:
    """The part of a row's key that ``scenario`` decides: its task scripts and its bug's check
    (rendering the scripts is the slow part, so it is done once)."""
    check = get_bug(get_scenario(scenario).bug).check
    return key_of(task_scripts(scenario), check.metric, check.direction)


def task_key(scenario: str, entries: tuple[str, ...], *parts: object) -> str:
    """The key of a row about ``scenario`` made by the code at ``entries``; ``parts`` name what
    else decided it (the seeds, the set's seed)."""
    model = get_scenario(scenario).model
    return key_of(scenario_part(scenario), _code(model, entries), list(parts))


@cache
def _code(model: str, entries: tuple[str, ...]) -> str:
    return code_digest(model, *entries)


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
