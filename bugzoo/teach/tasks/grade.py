"""``bugzoo task grade DIR --submission SUB --key KEYDIR``: grade a diagnosis and a fix by retraining.

A submission is a folder with the patched ``train.py`` and an ``answer.json`` (``category``, and
optionally ``bug`` and ``explanation``). The grader trains the patched script and the key's
fixed script with the key's seeds, each in a process of its own, and evaluates both trained
models on fresh data drawn with the key's secret seed (:mod:`~bugzoo.teach.tasks.runner`).

* **Kept the task:** no script error, the same data source (the global the model family names,
  ``SOURCE`` in :mod:`bugzoo.teach.reproducers`), no more optimizer steps than the fixed script,
  the same kinds of parameterised layers (any width or depth).
* **Healthy:** not worse than the fixed script beyond the margins
  (:mod:`~bugzoo.teach.tasks.health`).
* **Diagnosed:** the answer's category is the bug's.

*Solved* is all three. The grade goes to ``SUB/grade.json``; one line sums it up.
"""

from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.teach.tasks import health
from bugzoo.teach.tasks.make import categories
from bugzoo.teach.tasks.runner import ScriptProcess, Trained
from bugzoo.teach.tasks.script import family

FRESH_POINTS = 2000  # per seed: accuracy to about 1 point (binomial sd at 0.8)


@dataclass(frozen=True)
class Grade:
    """One graded submission."""

    diagnosed: bool
    kept_task: bool
    healthy: bool
    solved: bool
    category: str
    why_not_kept: str  # empty when kept
    accuracy: list[float]  # per seed: patched script's, then the fixed script's
    fixed_accuracy: list[float]
    loss: list[float]
    fixed_loss: list[float]
    accuracy_p: float
    loss_p: float

    def line(self) -> str:
        def mean(values: list[float]) -> str:
            return f"{sum(values) / len(values):.3f}"
        fix = ("healthy" if self.healthy else "not healthy") if self.kept_task else (
            f"not graded: {self.why_not_kept}")
        return (f"{'SOLVED' if self.solved else 'NOT SOLVED'}: diagnosis "
                f"{'right' if self.diagnosed else 'wrong'} ({self.category}); fix {fix} "
                f"(fresh-data accuracy {mean(self.accuracy)} vs {mean(self.fixed_accuracy)}, "
                f"loss {mean(self.loss)} vs {mean(self.fixed_loss)}; p = {self.accuracy_p:.3g}"
                f", {self.loss_p:.3g})")


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{what} {path} is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{what} {path} is not a JSON object")
    return data


def read_answer(submission: Path) -> str:
    """The submission's category, checked against the choices."""
    answer = read_json(submission / "answer.json", "answer")
    category = answer.get("category")
    if category not in categories():
        raise UsageError(f"answer {submission / 'answer.json'}: category {category!r} is not one "
                         f"of {', '.join(categories())}")
    if not (submission / "train.py").is_file():
        raise UsageError(f"submission {submission} has no train.py")
    return category


def train_all(script: Path, seeds: list[int], log: Path, source: str,
              fresh: dict[int, tuple[torch.Tensor, ...]]
              ) -> list[tuple[Trained, torch.Tensor | str]]:
    """Each seed's run of ``script`` (keeping its data source, the global named ``source``)
    and its model's outputs on that seed's fresh inputs."""
    found = []
    with ScriptProcess(script, log, source) as process:
        for seed in seeds:
            trained = process.train(seed)
            found.append((trained, trained.error or process.evaluate(fresh[seed])))
    return found


def why_not_kept(patched: Trained, fixed: Trained, source: torch.Tensor, name: str) -> str:
    """Why the patched run left the task, or ``""`` if it kept it; ``source`` is the data
    source the task draws for the run's seed, the script's global ``name``."""
    if patched.error:
        return f"seed {patched.seed} stopped with {patched.error}"
    if patched.source is None or not torch.equal(patched.source, source):
        return f"the data source changed ({name})"
    if patched.steps > fixed.steps:
        return f"{patched.steps} optimizer steps, more than the {fixed.steps} of the task"
    if set(patched.layers) != set(fixed.layers):
        return f"layers {sorted(patched.layers)} instead of {sorted(fixed.layers)}"
    return ""


def grade(submission: Path, key: Path) -> Grade:
    """Grade ``submission`` against the answer key ``key``."""
    category = read_answer(submission)
    answer = read_json(key / "key.json", "answer key")
    if not (key / "fixed.py").is_file():
        raise UsageError(f"answer key {key} has no fixed.py")
    task = family(answer["scenario"])
    seeds, settings = answer["seeds"], answer["settings"]
    sources = {s: task.data_source(s, settings) for s in seeds}
    fresh = {s: task.fresh_split(sources[s], FRESH_POINTS, answer["eval_seed"] * 1000 + s,
                                 settings) for s in seeds}
    with tempfile.TemporaryDirectory() as logs, ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda pair: train_all(pair[0], seeds, Path(logs) / pair[1],
                                                    task.SOURCE,
                                                    {s: x for s, (x, _) in fresh.items()}),
                             ((submission / "train.py", "patched.log"),
                              (key / "fixed.py", "fixed.log"))))
    broken = next((t for t, _ in runs[1] if t.error), None)
    if broken:  # the key's own script must train: this is the key's fault, not the submission's
        raise RuntimeError(f"the key's fixed.py failed on seed {broken.seed}: {broken.error}")
    patched = [health.outcome(out, fresh[t.seed][1], task.CLASSES) for t, out in runs[0]]
    fixed = [health.outcome(out, fresh[t.seed][1], task.CLASSES) for t, out in runs[1]]
    reasons = [why_not_kept(p, f, sources[p.seed], task.SOURCE)
               for (p, _), (f, _) in zip(*runs, strict=True)]
    why = next((r for r in reasons if r), "")
    verdict = health.judge(patched, fixed)
    diagnosed = category == answer["category"]
    return Grade(diagnosed, not why, verdict.healthy and not why,
                 diagnosed and verdict.healthy and not why, category, why,
                 [o.accuracy for o in patched], [o.accuracy for o in fixed],
                 [o.loss for o in patched], [o.loss for o in fixed],
                 verdict.accuracy_p, verdict.loss_p)


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task grade", description=__doc__.splitlines()[0])
    p.add_argument("task", type=Path, help="the task folder (as given to the solver)")
    p.add_argument("--submission", type=Path, required=True,
                   help="folder with the patched train.py and answer.json")
    p.add_argument("--key", type=Path, required=True, help="the task's answer key folder")
    args = p.parse_args(argv)
    if not (args.task / "REPORT.md").is_file():
        raise UsageError(f"{args.task} is not a task folder (no REPORT.md)")
    result = grade(args.submission, args.key)
    (args.submission / "grade.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    print(result.line())
    return 0 if result.solved else 1
