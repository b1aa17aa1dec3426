"""``bugzoo task grade DIR --submission SUB --key KEYDIR``: grade a diagnosis and a fix by retraining.

A submission is a folder with the patched ``train.py`` and an ``answer.json`` (``category``, and
optionally ``bug`` and ``explanation``). The grader trains the patched script and the key's
fixed script with the key's seeds, in processes of their own, and evaluates both trained
models on fresh data drawn with the key's secret seed (:mod:`~bugzoo.teach.tasks.runner`).
Each distinct run trains once (:mod:`~bugzoo.teach.tasks.cache`): the fixed script trains once
per key, not once per grade.

* **Kept the task:** no script error, the same data source (the global the model family names,
  ``SOURCE`` in :mod:`bugzoo.teach.reproducers`), no more optimizer steps than the fixed script,
  the same kinds of parameterised layers (any width or depth).
* **Healthy:** not worse than the fixed script beyond the margins
  (:mod:`~bugzoo.teach.tasks.health`).
* **Diagnosed:** the answer's category is the bug's.

*Solved* is all three. The grade goes to ``SUB/grade.json``; one line sums it up.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.teach.tasks import cache, health
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


Run = tuple[Trained, torch.Tensor | str]  # a seed's run, and its model's outputs (or error)


def train_all(scripts: list[Path], seeds: list[int], logs: Path, source: str,
              fresh: dict[int, tuple[torch.Tensor, ...]]) -> list[list[Run]]:
    """Per script, each seed's run (keeping its data source, the global named ``source``) and
    its model's outputs on that seed's fresh inputs.

    Each distinct run trains once: one kept in the cache (:mod:`~bugzoo.teach.tasks.cache`) is
    read from it; the others train in two processes at a time, the seeds dealt between them,
    and those that ended without an error are kept."""
    keys = {(i, seed): cache.key(script.read_text(), str(seed), source, *fresh[seed])
            for i, script in enumerate(scripts) for seed in seeds}
    found = {}
    for key in set(keys.values()):
        if (kept := cache.load(key)) is not None:
            found[key] = Trained(**kept["trained"]), kept["outputs"]
    todo: dict[str, tuple[int, int]] = {}
    for job, key in keys.items():
        if key not in found:
            todo.setdefault(key, job)
    missing = list(todo.items())

    def work(jobs: list[tuple[str, tuple[int, int]]], worker: int) -> dict[str, Run]:
        done = {}
        for i, group in itertools.groupby(jobs, key=lambda job: job[1][0]):
            with ScriptProcess(scripts[i], logs / f"script{i}-{worker}.log", source) as process:
                for key, (_, seed) in group:
                    trained = process.train(seed)
                    done[key] = trained, trained.error or process.evaluate(fresh[seed])
        return done

    with ThreadPoolExecutor(2) as pool:
        for done in pool.map(work, (missing[0::2], missing[1::2]), (0, 1)):
            found.update(done)
            for key, (trained, outputs) in done.items():
                if not trained.error and isinstance(outputs, torch.Tensor):
                    cache.save(key, {"trained": asdict(trained), "outputs": outputs})
    return [[found[keys[(i, seed)]] for seed in seeds] for i in range(len(scripts))]


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
    with tempfile.TemporaryDirectory() as logs:
        runs = train_all([submission / "train.py", key / "fixed.py"], seeds, Path(logs),
                         task.SOURCE, {s: x for s, (x, _) in fresh.items()})
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
