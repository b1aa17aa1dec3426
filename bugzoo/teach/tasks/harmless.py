"""``bugzoo task harmless``: whether the grader accepts each harmless change as the same result.

``oracle_variant`` (:mod:`~bugzoo.teach.tasks.solvers`) hands in a task's fix with a healthy
variant of the model's script on top (another batch size, optimizer, width, clipping or
dropout), to show whether the grader's margins accept a fix that is not the key's text. Its
misses mix two causes: a change that is not harmless on the task script's data, and margins too
tight for the model. This separates them on the plain clean script: each change the solver can
draw, on the model's clean script at its default settings, against the clean script itself, by
the grader's own retraining over its seeds, measured on fresh data, and its health test
(:mod:`~bugzoo.teach.tasks.health`). A change this test rejects is not the same result on that
model's clean script either. Writes ``harmless.md`` and ``harmless.csv``.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
from pathlib import Path
from statistics import fmean

import pandas as pd

from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.judge.tables import markdown
from bugzoo.teach.export import render_clean, template_models
from bugzoo.teach.tasks import health
from bugzoo.teach.tasks.grade import CPU_FACTOR, CPU_SLACK_S, FRESH_POINTS, train_all
from bugzoo.teach.tasks.make import GRADE_SEEDS
from bugzoo.teach.tasks.script import seeded
from bugzoo.teach.tasks.sealed_runs import secret_folders
from bugzoo.teach.tasks.solvers import harmless_changes

log = logging.getLogger(__name__)

# the fresh data's seed: published, since these scripts are no task to keep a secret from
EVAL_SEED = 1


def prove(model: str, work: Path, seeds: list[int] | None = None,
          changes: list[str] | None = None) -> list[dict]:
    """One row per harmless change of ``model`` (``changes``, default all the solver can draw):
    the changed clean script against the clean script over ``seeds`` (default the grader's),
    both measured on the same fresh data per seed, and the health test's verdict."""
    family = importlib.import_module(f"bugzoo.teach.reproducers.{model}")
    seeds = list(GRADE_SEEDS) if seeds is None else seeds
    names = sorted(harmless_changes(model)) if changes is None else changes
    settings = dict(family.DEFAULTS)
    sources = {s: family.data_source(s, settings) for s in seeds}
    fresh = {s: family.fresh_split(sources[s], FRESH_POINTS, EVAL_SEED * 1000 + s, settings)
             for s in seeds}
    scripts = []
    for name in ("clean", *names):
        scripts.append(work / f"{model}-{name}.py")
        scripts[-1].write_text(seeded(render_clean(None if name == "clean" else name, model)))
    runs = train_all(scripts, seeds, work, family.SOURCE, {s: x for s, (x, _) in fresh.items()},
                     secret_folders(None))
    measured = [[health.outcome(run.outputs, fresh[run.trained.seed][1], family.CLASSES)
                 for run in script_runs] for script_runs in runs]
    clean, rows = measured[0], []
    for name, changed, changed_runs in zip(names, measured[1:], runs[1:], strict=True):
        verdict = health.judge(changed, clean)
        rows.append({"model": model, "change": name, "harmless": verdict.healthy,
                     "accuracy": fmean(o.accuracy for o in changed),
                     "clean_accuracy": fmean(o.accuracy for o in clean),
                     "loss": fmean(o.loss for o in changed),
                     "clean_loss": fmean(o.loss for o in clean),
                     "accuracy_p": verdict.accuracy_p, "loss_p": verdict.loss_p,
                     "cpu_ratio": fmean(c.cpu_s / b.cpu_s for c, b in zip(changed_runs, runs[0],
                                                                          strict=True))})
    return rows


def page(table: pd.DataFrame, command: str) -> str:
    """``harmless.md``: the verdicts, and what they are."""
    rejected = table[~table["harmless"]]
    named = ", ".join(f"{m} `{c}`" for m, c in rejected[["model", "change"]].values) or "none"
    return (f"# Harmless changes, as the grader sees them\n\nRegenerate with `{command}`. Each "
            "change `oracle_variant` can draw (a healthy variant of the model's script that is "
            "an edit of its text), on the model's clean script at its default settings, "
            "against that clean script: both trained by the grader over its seeds "
            f"({', '.join(map(str, GRADE_SEEDS))}) and measured on the same fresh data per "
            f"seed (evaluation seed {EVAL_SEED}), judged by the grader's health test "
            "(`bugzoo/teach/tasks/health.py`: not worse beyond 3 accuracy points and 0.1 "
            "nats, by an exact one-sided sign-flip test paired by seed, p <= 0.05 for both). "
            "Accuracy and loss are means over the seeds. `cpu_ratio` is the change's CPU time "
            "over the clean script's, per seed then averaged, as the grader counts it for its "
            f"budget (a fix may spend {CPU_FACTOR:g} times the fixed script's, and "
            f"{CPU_SLACK_S:g} s): the largest is {table['cpu_ratio'].max():.2f}.\n\n"
            f"**{int(table['harmless'].sum())} of {len(table)} changes pass.** Rejected: "
            f"{named}.\n\n{markdown(table.round(3))}\n")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task harmless", description=__doc__.splitlines()[0])
    p.add_argument("--model", dest="models", nargs="+", default=None,
                   help=f"models with a script template (default: all: "
                        f"{', '.join(template_models())})")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="where harmless.md and .csv go (default: results)")
    args = p.parse_args(argv)
    models = args.models or template_models()
    if unknown := [m for m in models if m not in template_models()]:
        raise UsageError(f"no script template for {', '.join(unknown)} (choose from: "
                         f"{', '.join(template_models())})")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for number, model in enumerate(models, 1):
            log.info("%s/%s: %s, each change against its clean script", number, len(models),
                     model)
            rows += prove(model, Path(work))
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "harmless.csv", index=False)
    (args.out / "harmless.md").write_text(page(table, command_line("task harmless", argv)))
    print(f"{int(table['harmless'].sum())} of {len(table)} changes pass -> "
          f"{args.out / 'harmless.md'}")
    return 0
