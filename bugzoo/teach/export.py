"""``bugzoo export <scenario> --out DIR``: a standalone buggy.py / fixed.py reproducer pair.

The scripts are plain PyTorch (no bugzoo import): tiny inline data, model and loop, ending with
``SYMPTOM <metric>=<value>``. ``--blind KEYFILE`` writes them as ``a.py`` and ``b.py`` with
neutral headers and comments, and which one is buggy to ``KEYFILE`` only. The fixed script is a
per-model template (``bugzoo.teach.reproducers``); the buggy one is the same script plus the
bug's small patch, its :class:`~bugzoo.bugs.Delta`, which lives beside its plant in the bug's
module. A bug whose mistake lives in a feature the template lacks (early stopping, gradient
accumulation) writes the feature into both scripts first, with a
:class:`~bugzoo.bugs.SetupDelta`.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from pathlib import Path
from string import Template

import pandas as pd

from bugzoo.bugs import Delta, SetupDelta, get_bug
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.judge.tables import markdown
from bugzoo.scenarios import Scenario, get_scenario, list_scenarios, scenario_id
from bugzoo.teach import reproducers

EXPECT = {"higher": "higher", "lower": "lower", "event": "1 (it happened)"}

# Bugs whose scenarios cannot become a plain pair of CPU scripts graded on their outcome, by
# mechanism (the same on every model). A scenario neither here nor exported has no delta yet.
CANNOT_EXPORT: dict[str, str] = {
    "accuracy_wrong": ("its symptom is the script's validation accuracy disagreeing with its "
                       "holdout accuracy (val_holdout_gap); a script measures both with the "
                       "same code, so a wrong comparison there skews both alike"),
    "adam_eps_fp16": "needs float16 parameters on a GPU; the scripts train in float32 on the CPU",
    "dataloader_bottleneck": ("its symptom is the time a step waits for data (data_time_frac), not "
                              "an outcome the scripts or the grader measure"),
    "ddp_unsynced": "needs several processes under torch.distributed; a script is one process",
    "fp16_no_scaler": "needs float16 autocast on a GPU; the scripts train in float32 on the CPU",
    "init_repeated": ("its symptom is start-up time (startup_s), not an outcome the scripts or "
                      "the grader measure"),
    "left_pad_positions": ("its symptom shows when the model writes after left-padded prompts "
                           "(generation_gap), which neither the scripts nor the grader do"),
    "loss_tensor_kept": ("its symptom is memory growth (heap_growth_mb), not an outcome the "
                         "scripts or the grader measure"),
    "mask_after_softmax": ("its symptom shows when the trained model serves batches padded to "
                           "another length (serving_gap), which neither the scripts nor the "
                           "grader do"),
    "missing_causal_mask": ("a model that sees the future scores well on next-token loss; its "
                            "symptom shows only when it writes (generation_gap), which neither "
                            "the scripts nor the grader do"),
    "nondeterministic_seed": ("its symptom is that two runs of one seed disagree, which a buggy "
                              "script beside a fixed one cannot show"),
    "worker_rng_copied": ("needs DataLoader worker processes; the scripts hold their data in "
                          "tensors, without workers"),
}


def _family(model: str):
    return importlib.import_module(f"{reproducers.__name__}.{model}")


def template_models() -> list[str]:
    """The models with a reproducer template (``bugzoo/teach/reproducers/<model>.py``)."""
    return sorted(m.name for m in pkgutil.iter_modules(reproducers.__path__)
                  if not m.name.startswith("_"))  # _shared: text the templates share


def supported() -> list[str]:
    """Scenario ids that can be exported: ``<model>-<bug>`` for each model with a template
    and each bug that carries a :class:`Delta` for it, built-in or plug-in."""
    models = template_models()
    return sorted(s.id for s in list_scenarios() if _exports(s, models))


def _exports(spec: Scenario, models: list[str]) -> bool:
    """Whether the scenario ``spec`` exports, given the ``models`` with a template."""
    return bool(spec.bug) and spec.model in models and spec.id == scenario_id(
        spec.model, spec.bug) and spec.model in get_bug(spec.bug).reproducers


def exportable(scenarios: list[str] | None) -> list[str]:
    """``scenarios``, each checked to export (an id that does not is a one-line error naming
    those that do); all the exportable ones when ``None``."""
    for scenario in scenarios or ():
        if scenario not in supported():
            raise unknown_choice("exportable scenario", scenario, supported())
    return scenarios or supported()


def export_status(scenario: str) -> tuple[str, str]:
    """Whether the bug scenario ``scenario`` (``<model>-<bug>``) exports: ``("exported", "")``,
    or ``"not yet"``, ``"cannot export"`` or ``"loud"`` with the reason why not."""
    spec = get_scenario(scenario)
    bug, models = get_bug(spec.bug), template_models()
    if _exports(spec, models):
        return "exported", ""
    if spec.model not in models:
        return "not yet", f"no {spec.model} reproducer template yet"
    if bug.loud:
        return "loud", "loud: the run crashes or hangs at once, so there is nothing to find"
    if spec.bug in CANNOT_EXPORT:
        return "cannot export", CANNOT_EXPORT[spec.bug]
    return "not yet", f"no export delta for the {spec.model} template yet"


def why_not_exported(scenario: str) -> str:
    """Why the bug scenario ``scenario`` has no exported pair; ``""`` when it has one."""
    return export_status(scenario)[1]


def status_page(command: str) -> str:
    """``results/exports.md``: per model, how many bug scenarios export, and why each of the
    others does not."""
    rows = []
    for spec in list_scenarios():
        if spec.bug and spec.id == scenario_id(spec.model, spec.bug):
            kind, why = export_status(spec.id)
            rows.append({"model": spec.model, "scenario": spec.id, "kind": kind, "why_not": why})
    table = pd.DataFrame(rows).sort_values(["model", "scenario"])
    counts = pd.crosstab(table["model"], table["kind"]).reindex(
        columns=["exported", "not yet", "cannot export", "loud"], fill_value=0)
    counts.insert(0, "bug scenarios", counts.sum(axis=1))
    counts.loc["all"] = counts.sum()
    missing = table[table["why_not"] != ""]
    return (f"# Which scenarios export\n\nRegenerate with `{command}`. A bug scenario exports as a "
            "standalone buggy/fixed pair of plain PyTorch scripts (`bugzoo export`, the find-and-fix "
            "tasks of `bugzoo task`) when its model has a reproducer template and its bug an "
            "export delta for that template. *Cannot export*: the bug's mechanism or symptom does "
            "not fit one CPU script graded on its outcome. *Not yet*: no template or delta is "
            f"written yet.\n\n**{counts.loc['all', 'exported']} of "
            f"{counts.loc['all', 'bug scenarios']} bug scenarios export.**\n\n"
            f"{markdown(counts.reset_index().rename(columns={'index': 'model'}))}\n\n"
            f"## The scenarios that do not export\n\n"
            f"{markdown(missing[['scenario', 'why_not']])}\n")


def render(scenario: str) -> dict[str, str]:
    """The ``buggy`` and ``fixed`` scripts of a supported scenario."""
    spec = get_scenario(scenario)  # an unknown id: one line with a "did you mean"
    if not _exports(spec, template_models()):
        raise UsageError(f"no standalone reproducer for scenario '{scenario}' "
                         f"(supported: {', '.join(supported())})")
    family, bug = _family(spec.model), get_bug(spec.bug)
    delta = bug.reproducers[spec.model]
    fixed = family.TEMPLATE
    if pipeline := delta.settings.get("PIPELINE"):  # a data-pipeline step the template lacks
        fixed = _patched(fixed, Delta(family.PIPELINES[pipeline]), f"pipeline {pipeline}")
    if isinstance(delta, SetupDelta):
        fixed = _patched(fixed, Delta(delta.setup), spec.bug)
    buggy = _patched(fixed, delta, spec.bug)
    settings = {**family.DEFAULTS, **delta.settings, "TITLE": bug.title, "SCENARIO": scenario,
                "METRIC": bug.check.metric,
                "PURPOSE": f"The last line prints the symptom: {bug.check.metric} should be "
                           f"{EXPECT[bug.check.direction]} in buggy.py than in fixed.py."}
    return {variant: Template(text).substitute(settings, VARIANT=variant)
            for variant, text in (("buggy", buggy), ("fixed", fixed))}


def _patched(text: str, delta: Delta, name: str) -> str:
    """``text`` with each of ``delta``'s replacements made; each must match exactly once."""
    for old, new in delta.patch:
        if text.count(old) != 1:
            raise RuntimeError(f"reproducer patch of {name} matches {text.count(old)} times: "
                               f"{old!r}")
        text = text.replace(old, new)
    return text


def healthy_variants(model: str = "mlp") -> list[str]:
    """The healthy variants of ``model``'s fixed reproducer (see :func:`render_clean`)."""
    return sorted(getattr(_family(model), "HEALTHY", {}))


def render_clean(variant: str | None = None, model: str = "mlp") -> str:
    """A clean script: ``model``'s fixed reproducer on its default settings, or a healthy
    ``variant`` of it (a deliberate, harmless change: another batch size, optimizer or width,
    named after the harness's clean variant it mirrors)."""
    family = _family(model)
    healthy = getattr(family, "HEALTHY", {})
    if variant is not None and variant not in healthy:
        raise UsageError(f"no healthy variant '{variant}' of the {model} reproducer "
                         f"(choose from: {', '.join(sorted(healthy))})")
    delta = healthy[variant] if variant else Delta(())
    name = f"{model}-clean-{variant}" if variant else f"{model}-clean"
    settings = {**family.DEFAULTS, **delta.settings, "SCENARIO": name,
                "TITLE": f"{model}, healthy ({variant})" if variant else f"{model}, clean",
                "METRIC": "final_val_acc",
                "PURPOSE": "The clean pipeline, or a deliberate, harmless change to it."}
    return Template(_patched(family.TEMPLATE, delta, name)).substitute(settings, VARIANT="fixed")


def export(scenario: str, out: Path) -> list[Path]:
    scripts = render(scenario)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {out} ({e.strerror or e})") from None
    paths = []
    for variant, text in scripts.items():
        path = out / f"{variant}.py"
        path.write_text(text)
        paths.append(path)
    return paths


def export_blind(scenario: str, out: Path, key: Path, seed: int) -> list[Path]:
    """The pair as ``a.py`` and ``b.py``, in an order drawn from ``seed``, with neutral
    headers and comments (the task scripts of ``bugzoo task``); which one is buggy goes to the
    file ``key`` only."""
    # here: bugzoo.teach.tasks.script imports this module
    from bugzoo.teach.tasks.script import task_scripts
    scripts = task_scripts(scenario)
    order = ["buggy", "fixed"] if random.Random(f"{seed}-{scenario}").random() < 0.5 else [
        "fixed", "buggy"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        key.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {out} or {key.parent} ({e.strerror or e})") from None
    paths = []
    for name, variant in zip("ab", order, strict=True):
        path = out / f"{name}.py"
        path.write_text(scripts[variant])
        paths.append(path)
    buggy = paths[order.index("buggy")].name
    key.write_text(f"{scenario}: {buggy} is the buggy script\n")
    return paths


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo export", description=__doc__.splitlines()[0])
    p.add_argument("scenario", nargs="?", help="scenario id, e.g. mlp-double_softmax")
    p.add_argument("--out", type=Path, help="folder for buggy.py and fixed.py")
    p.add_argument("--list", action="store_true", help="list the exportable scenarios")
    p.add_argument("--blind", type=Path, metavar="KEYFILE",
                   help="write a.py and b.py with neutral headers and comments instead, and "
                        "which one is buggy to KEYFILE only")
    p.add_argument("--seed", type=int, default=0, help="with --blind: draws the order")
    p.add_argument("--status", type=Path, metavar="FILE",
                   help="write which bug scenarios export, and why each other one does not, to "
                        "FILE (Markdown)")
    args = p.parse_args(argv)
    if args.status:
        text = status_page(command_line("export", argv))
        try:
            args.status.write_text(text)
        except OSError as e:
            raise UsageError(f"cannot write {args.status} ({e.strerror or e})") from None
        print(f"wrote {args.status}")
        return 0
    if args.list:
        print("\n".join(supported()))
        return 0
    if not args.scenario or args.out is None:
        raise UsageError("give a scenario and --out DIR (or --list)")
    if get_scenario(args.scenario).bug is None:  # an unknown id: one line, "did you mean"
        raise UsageError(f"scenario '{args.scenario}' plants no bug: a reproducer pair is a "
                         "bug's buggy.py beside its fixed.py")
    if reason := why_not_exported(args.scenario):  # the reason, not the list of the others
        raise UsageError(f"no standalone reproducer for scenario '{args.scenario}': {reason} "
                         f"(`bugzoo export --list` lists the {len(supported())} that export)")
    if args.blind:
        render(args.scenario)  # an unknown or unexportable scenario: its one-line error first
        for path in export_blind(args.scenario, args.out, args.blind, args.seed):
            print(f"wrote {path}")
        print(f"which one is buggy: {args.blind}")
        return 0
    for path in export(args.scenario, args.out):
        print(f"wrote {path}")
    print(f"run: python {args.out / 'fixed.py'} && python {args.out / 'buggy.py'}")
    return 0
