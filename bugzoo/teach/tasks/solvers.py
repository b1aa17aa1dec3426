"""Reference solvers: each writes a submission for a task folder.

* ``noop`` hands the script back unchanged and diagnoses ``none``: a grader that passes it is
  broken, so it must score 0.
* ``oracle`` hands in the key's fixed script and the key's category: it must score 100%, so a
  miss is a grader or export bug, not a hard task.
* ``oracle_variant`` hands in the key's fix with a harmless change on top (another batch size,
  optimizer, width, clipping or dropout: a healthy variant of the model's script, chosen by
  the task's scenario, among those the grader's own test passes on the model's clean script,
  ``results/harmless.csv``). It must score about 100% too: the grader's margins accept a fix
  that is not the key's exact text.
* ``rules`` runs the task's script once with bugzoo's heuristic detectors watching its loop,
  diagnoses from their alarms and patches from a table of known fixes (:mod:`.rules`).
"""

from __future__ import annotations

import importlib
import json
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from string import Template

import pandas as pd

from bugzoo.detector_registry import select_detectors
from bugzoo.errors import UsageError
from bugzoo.paths import ROOT
from bugzoo.teach.tasks.cheats import key_reader, template_reader
from bugzoo.teach.tasks.rules import diagnose, repair
from bugzoo.teach.tasks.runner import ScriptProcess

HARMLESS_VERDICTS = ROOT / "results" / "harmless.csv"  # bugzoo task harmless writes it


def _write(submission: Path, script: Path, answer: dict[str, str], text: str | None = None
           ) -> Path:
    """``submission`` with ``script`` (or ``text`` in its place) as train.py, and the answer."""
    submission.mkdir(parents=True, exist_ok=True)
    if text is None:
        shutil.copyfile(script, submission / "train.py")
    else:
        (submission / "train.py").write_text(text)
    (submission / "answer.json").write_text(json.dumps(answer, indent=1) + "\n")
    return submission


def noop(task: Path, key: Path, submission: Path) -> Path:
    return _write(submission, task / "train.py", {"category": "none"})


def oracle(task: Path, key: Path, submission: Path) -> Path:
    answer = json.loads((key / "key.json").read_text())
    return _write(submission, key / "fixed.py",
                  {"category": answer["category"], "bug": answer["bug"],
                   "explanation": answer["title"]})


def harmless_changes(model: str) -> dict[str, list[tuple[str, str]]]:
    """The healthy variants of ``model``'s script that are edits of its text (the ones that only
    change a setting are left out: the task scripts carry settings as numbers)."""
    family = importlib.import_module(f"bugzoo.teach.reproducers.{model}")
    return {name: list(delta.patch) for name, delta in sorted(family.HEALTHY.items())
            if delta.patch and not delta.settings and "label_smoothing" not in name}


def proven_harmless(model: str) -> list[str]:
    """The changes of ``model`` that ``bugzoo task harmless`` found harmless on its clean
    script (``results/harmless.csv``), which ``oracle_variant`` draws from."""
    if not HARMLESS_VERDICTS.is_file():
        raise UsageError(f"oracle_variant draws only changes proven harmless, and "
                         f"{HARMLESS_VERDICTS} does not exist: run `bugzoo task harmless`")
    verdicts = pd.read_csv(HARMLESS_VERDICTS)
    return sorted(verdicts.loc[(verdicts["model"] == model) & verdicts["harmless"], "change"])


def oracle_variant(task: Path, key: Path, submission: Path) -> Path:
    answer = json.loads((key / "key.json").read_text())
    text = (key / "fixed.py").read_text()
    proven = proven_harmless(answer["model"])
    changes = {name: [tuple(Template(s).safe_substitute(answer["settings"]) for s in edit)
                      for edit in edits]
               for name, edits in harmless_changes(answer["model"]).items() if name in proven}
    # the ones whose text the fixed script holds (a fix with a feature of its own, such as
    # gradient accumulation, may have rewritten a line another change edits)
    fitting = sorted(name for name, edits in changes.items()
                     if all(text.count(old) == 1 for old, _ in edits))
    if not fitting:
        raise RuntimeError(f"no harmless change fits {key / 'fixed.py'}")
    # fixed per scenario, so renumbering a task set leaves each task's variant where it was
    name = fitting[zlib.crc32(answer["scenario"].encode()) % len(fitting)]
    for old, new in changes[name]:
        text = text.replace(old, new)
    submission.mkdir(parents=True, exist_ok=True)
    (submission / "variant.txt").write_text(name + "\n")
    return _write(submission, key / "fixed.py", {"category": answer["category"],
                                                  "bug": answer["bug"]}, text)


def rules(task: Path, key: Path, submission: Path) -> Path:
    script = task / "train.py"
    submission.mkdir(parents=True, exist_ok=True)
    with ScriptProcess(script, submission / "watched.log") as process:
        watched = process.train(0, tuple(select_detectors(["builtins"])))
    category = diagnose(watched.alarms)
    text, applied = repair(script.read_text(), category)
    return _write(submission, script, {"category": category, "explanation": "; ".join(
        applied) or "no known fix matched"}, text)


# what a solver reads beside its task and key, per model: it joins the solver's grade keys
SOLVER_INPUTS: dict[str, Callable[[str], object]] = {"oracle_variant": proven_harmless}
SOLVERS: dict[str, Callable[[Path, Path, Path], Path]] = {
    "noop": noop, "oracle": oracle, "oracle_variant": oracle_variant, "rules": rules,
    "key_reader": key_reader, "template_reader": template_reader}  # the last two: cheats
