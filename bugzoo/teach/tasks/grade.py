"""``bugzoo task grade DIR --submission SUB --key KEYDIR``: grade a diagnosis and a fix by retraining.

A submission is a folder with the patched ``train.py`` and an ``answer.json`` (``category``, and
optionally ``bug`` and ``explanation``). The grader trains the patched script and the key's
fixed script with the key's seeds, sealed (:mod:`~bugzoo.teach.tasks.sealed_runs`: confined,
with the key, bugzoo and its results out of sight, no network), and evaluates both trained
models on fresh data drawn with the key's secret seed, sent to the models only once they have
trained; the labels never enter a script's process. Each distinct run trains once
(:mod:`~bugzoo.teach.tasks.cache`): the fixed script trains once per key, not once per grade.

* **Kept the task:** no script error, the same data source (the global the model family names,
  ``SOURCE`` in :mod:`bugzoo.teach.reproducers`), no more optimizer steps than the fixed script
  (counted by a hook in the run), no more CPU time than :func:`cpu_budget` allows against the
  fixed script's (counted by the kernel, outside the run), the same kinds of parameterised
  layers (any width or depth).
* **Healthy:** not worse than the fixed script beyond the margins
  (:mod:`~bugzoo.teach.tasks.health`).
* **Diagnosed:** the answer's category is the bug's.

*Solved* is all three. The grade goes to ``SUB/grade.json``; one line sums it up and says how
the runs were confined (a grade made unconfined is not credible: the script could read the key).
"""

from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import sandbox
from bugzoo.teach.tasks import cache, health
from bugzoo.teach.tasks.make import categories
from bugzoo.teach.tasks.runner import Trained
from bugzoo.teach.tasks.script import family
from bugzoo.teach.tasks.sealed_runs import (
    PROTOCOL,
    SealedRun,
    SealedScripts,
    secret_folders,
    shared_servers,
)

FRESH_POINTS = 2000  # per seed: accuracy to about 1 point (binomial sd at 0.8)
# A fix trains the task's model for the task's steps, so it costs about what the fixed script
# costs; the harmless changes the grader must accept (a 4x batch, a 4x wider layer) cost more
# per step (``cpu_ratio`` in results/harmless.md, a test holds the factor above the largest),
# and the factor leaves room above that. The slack covers a run's scheduling noise
# (milliseconds). A run's CPU
# time is counted by the kernel for its whole process tree (sealed_runs), so clearing the step
# hooks or stepping by hand does not hide it; training 3x longer still fits.
CPU_FACTOR, CPU_SLACK_S = 3.0, 0.05


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
    sandbox: str  # what the runs were confined by ("unconfined": a grade not to be trusted)

    def line(self) -> str:
        def mean(values: list[float]) -> str:
            return f"{sum(values) / len(values):.3f}"
        fix = ("healthy" if self.healthy else "not healthy") if self.kept_task else (
            f"not graded: {self.why_not_kept}")
        return (f"{'SOLVED' if self.solved else 'NOT SOLVED'}: diagnosis "
                f"{'right' if self.diagnosed else 'wrong'} ({self.category}); fix {fix} "
                f"(fresh-data accuracy {mean(self.accuracy)} vs {mean(self.fixed_accuracy)}, "
                f"loss {mean(self.loss)} vs {mean(self.fixed_loss)}; p = {self.accuracy_p:.3g}"
                f", {self.loss_p:.3g}; {confinement_note(self.sandbox)})")


def confinement_note(confinement: str) -> str:
    """How a grade's runs were confined, as its line says it."""
    return ("sealed: runs confined by Linux namespaces" if confinement == sandbox.NAMESPACES
            else "UNCONFINED: the runs could read the key, so this grade is not credible")


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


def train_all(scripts: list[Path], seeds: list[int], logs: Path, source: str,
              fresh: dict[int, tuple[torch.Tensor, ...]], hidden: list[Path]
              ) -> list[list[SealedRun]]:
    """Per script, each seed's sealed run (:mod:`~bugzoo.teach.tasks.sealed_runs`, ``hidden``
    covered), keeping its data source (the global named ``source``), with its model's outputs
    on that seed's fresh inputs.

    Each distinct run trains once: one kept in the cache (:mod:`~bugzoo.teach.tasks.cache`) is
    read from it; the others train in two sealed servers at a time, the runs dealt between
    them (:func:`~bugzoo.teach.tasks.sealed_runs.shared_servers`), and those that ended
    without an error are kept."""
    texts = [script.read_text() for script in scripts]
    keys = {(i, seed): cache.key(PROTOCOL, texts[i], str(seed), source, *fresh[seed])
            for i in range(len(scripts)) for seed in seeds}
    found = {}
    for key in set(keys.values()):
        if (kept := cache.load(key)) is not None:
            found[key] = SealedRun(Trained(**kept["trained"]), kept["outputs"], kept["cpu_s"])
    todo: dict[str, tuple[int, int]] = {}
    for job, key in keys.items():
        if key not in found:
            todo.setdefault(key, job)
    missing = list(todo.items())

    def work(jobs: list[tuple[str, tuple[int, int]]], server: SealedScripts
             ) -> dict[str, SealedRun]:
        return {key: server.run(texts[i], seed, source, fresh[seed], logs / f"script{i}.log")
                for key, (i, seed) in jobs}

    with ThreadPoolExecutor(2) as pool:
        for done in pool.map(work, (missing[0::2], missing[1::2]), shared_servers(hidden, 2)):
            found.update(done)
            for key, run in done.items():
                if not run.trained.error and isinstance(run.outputs, torch.Tensor):
                    cache.save(key, {"trained": asdict(run.trained), "outputs": run.outputs,
                                     "cpu_s": run.cpu_s})
    return [[found[keys[(i, seed)]] for seed in seeds] for i in range(len(scripts))]


def cpu_budget(fixed_cpu_s: float) -> float:
    """The CPU seconds a fix may spend on a seed: :data:`CPU_FACTOR` times the fixed script's,
    and :data:`CPU_SLACK_S`."""
    return CPU_FACTOR * fixed_cpu_s + CPU_SLACK_S


def why_not_kept(patched: SealedRun, fixed: SealedRun, source: torch.Tensor, name: str) -> str:
    """Why the patched run left the task, or ``""`` if it kept it; ``source`` is the data
    source the task draws for the run's seed, the script's global ``name``."""
    run, seed = patched.trained, patched.trained.seed
    if run.error:
        return f"seed {seed} stopped with {run.error}"
    if run.source is None or not torch.equal(run.source, source):
        return f"the data source changed ({name})"
    if run.steps > fixed.trained.steps:
        return f"{run.steps} optimizer steps, more than the {fixed.trained.steps} of the task"
    if patched.cpu_s > (budget := cpu_budget(fixed.cpu_s)):
        return (f"{patched.cpu_s:.1f} CPU-s on seed {seed}, over the task's budget of "
                f"{budget:.1f} ({CPU_FACTOR:g} times the fixed script's, and {CPU_SLACK_S:g} s)")
    if set(run.layers) != set(fixed.trained.layers):
        return f"layers {sorted(run.layers)} instead of {sorted(fixed.trained.layers)}"
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
                         task.SOURCE, {s: x for s, (x, _) in fresh.items()}, secret_folders(key))
    broken = next((r.trained for r in runs[1] if r.trained.error), None)
    if broken:  # the key's own script must train: this is the key's fault, not the submission's
        raise RuntimeError(f"the key's fixed.py failed on seed {broken.seed}: {broken.error}")
    patched, fixed = ([health.outcome(r.outputs, fresh[r.trained.seed][1], task.CLASSES)
                       for r in script_runs] for script_runs in runs)
    reasons = [why_not_kept(p, f, sources[p.trained.seed], task.SOURCE)
               for p, f in zip(*runs, strict=True)]
    why = next((r for r in reasons if r), "")
    verdict = health.judge(patched, fixed)
    diagnosed = category == answer["category"]
    return Grade(diagnosed, not why, verdict.healthy and not why,
                 diagnosed and verdict.healthy and not why, category, why,
                 [o.accuracy for o in patched], [o.accuracy for o in fixed],
                 [o.loss for o in patched], [o.loss for o in fixed],
                 verdict.accuracy_p, verdict.loss_p, sandbox.confinement())


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
