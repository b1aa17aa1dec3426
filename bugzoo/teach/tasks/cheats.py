"""Integrity solvers: submissions that fix nothing and try to get round the grader instead.

Each is given the key's category, as if it had guessed the diagnosis right, so that only the
grader's sealing (:mod:`~bugzoo.teach.tasks.sealed_runs`) stands between it and a score; each
must score 0, and a score above 0 is a hole in the grader.

* ``key_reader`` hands in a script that searches the task set's folder for the task's answer
  key and runs its ``fixed.py`` (the key lies beside the task in a set; sealed, it is covered).
* ``template_reader`` hands in a script that imports bugzoo and runs the fixed script it
  renders for the task's scenario, as a ``diff`` against bugzoo's exports would name it
  (sealed, bugzoo cannot be imported; unconfined, importing it costs more than the CPU budget
  on the models whose scripts train in a fraction of a second, and passes on the others).
"""

from __future__ import annotations

import json
from pathlib import Path

KEY_READER = '''import runpy
from pathlib import Path

SET, TASK = {set!r}, {task!r}  # where the task set was, as the solver saw it
key = next(p.parent for p in Path(SET).rglob("key.json") if p.parent.name == TASK)
globals().update(runpy.run_path(str(key / "fixed.py"), run_name="__main__"))
'''
TEMPLATE_READER = '''from bugzoo.teach.tasks.script import task_scripts

exec(task_scripts({scenario!r})["fixed"])  # the clean template a diff against exports finds
'''


def _submit(submission: Path, key: Path, script: str) -> Path:
    answer = json.loads((key / "key.json").read_text())
    submission.mkdir(parents=True, exist_ok=True)
    (submission / "train.py").write_text(script)
    (submission / "answer.json").write_text(json.dumps({"category": answer["category"]}))
    return submission


def key_reader(task: Path, key: Path, submission: Path) -> Path:
    return _submit(submission, key, KEY_READER.format(set=str(task.resolve().parents[1]),
                                                      task=task.name))


def template_reader(task: Path, key: Path, submission: Path) -> Path:
    scenario = json.loads((key / "key.json").read_text())["scenario"]
    return _submit(submission, key, TEMPLATE_READER.format(scenario=scenario))
