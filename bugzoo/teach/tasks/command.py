"""``bugzoo task make|grade|set|agents|validate|harmless|watched``: find-and-fix tasks, graded by retraining."""

from __future__ import annotations

from bugzoo.errors import unknown_choice
from bugzoo.teach.tasks import exported, grade, harmless, make, taskset, watched

ACTIONS = {"make": make.main, "grade": grade.main, "set": taskset.set_main,
           "agents": taskset.agents_main, "validate": exported.main, "harmless": harmless.main,
           "watched": watched.main}
USAGE = """usage: bugzoo task ACTION ...

  make SCENARIO --out DIR --key KEYDIR   write a task folder and its answer key
  grade DIR --submission SUB --key KEYDIR
                                         grade a diagnosis and fix by retraining
  set --out DIR                          every exportable scenario as a task
  agents --set DIR                       score the reference solvers (results/agents.md)
  validate                               prove each exported pair shows its bug's symptom
                                         (results/validity_exported.md)
  harmless                               whether the grader accepts each model's harmless
                                         changes as the same result (results/harmless.md)
  watched                                bugzoo watch on every valid exported pair and on
                                         clean loops written outside bugzoo (results/watch.md)

bugzoo task ACTION --help tells more. Every action takes --include DIR (repeatable): scenario
files from an outside folder."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] not in ACTIONS:
        raise unknown_choice("task action", argv[0], ACTIONS)
    return ACTIONS[argv[0]](argv[1:])

