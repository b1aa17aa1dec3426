"""``bugzoo list`` and ``bugzoo show``: the catalogue as tables and cards."""

from __future__ import annotations

import textwrap

import pandas as pd

from bugzoo.bugs import BUGS, Bug, get_bug, list_bugs
from bugzoo.detector import is_sealed
from bugzoo.detector_registry import DETECTORS, detector_class
from bugzoo.errors import ArgumentParser, unknown_choice
from bugzoo.judge.tables import markdown
from bugzoo.models import MODELS, get_model
from bugzoo.scenarios import list_scenarios

LISTS = ("bugs", "models", "scenarios", "detectors")


def bugs_table() -> pd.DataFrame:
    return pd.DataFrame([{
        "id": b.id, "category": b.category, "loud": "loud" if b.loud else "silent",
        "models": ",".join(b.models), "title": b.title, "package": BUGS.provider(b.id)[0],
    } for b in list_bugs()])


def models_table() -> pd.DataFrame:
    return pd.DataFrame([{"id": m, "dataset": get_model(m).dataset,
                          "description": get_model(m).description} for m in MODELS.names()])


def scenarios_table() -> pd.DataFrame:
    rows = []
    for s in list_scenarios():
        skipped = s.skip_reason()
        rows.append({"id": s.id, "model": s.model, "bug": s.bug or "clean",
                     "control": s.control or ("" if s.clean else "(none)"),
                     "default_sweep": not skipped, "note": skipped or s.description})
    return pd.DataFrame(rows)


def detectors_table() -> pd.DataFrame:
    """Every installed detector: what it is (role, scope), whether a plain bench runs it,
    whether it is sealed (scored on stored traces, outside the training process), and where it
    comes from."""
    rows = []
    for name, ep in sorted(DETECTORS.entry_points().items()):
        try:
            cls = detector_class(name)
            facts = {"role": cls.role, "scope": cls.scope if cls.role != "baseline" else "",
                     "default": "yes" if DETECTORS.is_own(name) and cls.run_by_default
                     else "no", "sealed": "yes" if is_sealed(cls) else "no"}
        except ImportError as e:  # an optional tool that is not installed
            facts = {"role": "?", "scope": "", "default": "no", "sealed": "?",
                     "note": f"cannot import: {e}"}
        rows.append({"name": name, **facts, "package": ep.dist.name if ep.dist else "",
                     "entry_point": ep.value})
    return pd.DataFrame(rows).fillna("")


def list_main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="bugzoo list", description="List catalogue entries.")
    parser.add_argument("what", help=f"one of: {', '.join(LISTS)}")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    tables = {"bugs": bugs_table, "models": models_table, "scenarios": scenarios_table,
              "detectors": detectors_table}
    if args.what not in tables:
        raise unknown_choice("list", args.what, LISTS)
    table = tables[args.what]()
    if not len(table):
        print(f"(no {args.what})")
    else:
        print(markdown(table) if args.markdown else table.to_string(index=False))
    return 0


# what each outcome a symptom check reads is, in the words of the person running the training
OUTCOME_WORDS = {
    "final_val_loss": "validation loss at the end",
    "final_val_acc": "validation accuracy at the end",
    "best_val_acc": "best validation accuracy",
    "final_loss": "training loss at the end",
    "initial_loss": "training loss at the first step",
    "initial_val_loss": "validation loss before training",
    "val_holdout_gap": "validation accuracy minus accuracy on data the run never saw",
    "serving_gap": "accuracy as trained minus accuracy as served",
    "generation_gap": ("quality of the text the model writes, as the language scores it, "
                       "minus its quality on text it reads"),
    "heap_growth_mb": "memory the process holds",
    "peak_rss_mb": "peak memory of the process",
    "data_time_frac": "share of each step spent waiting for data",
    "median_step_s": "time per step",
    "startup_s": "time before the first step",
    "nonfinite": "NaN or inf in the loss or gradients",
    "crashed": "crash",
    "hung": "hang",
}


def observed(bug: Bug) -> str:
    """The bug's symptom as a practitioner states it, from its check: what moved and which way,
    never what causes it."""
    what, direction = OUTCOME_WORDS[bug.check.metric], bug.check.direction
    if direction == "event":
        return f"The run shows a {what}; a working run does not."
    if direction == "varies":
        return f"The {what} differs between two runs of the same seed."
    return f"The {what} is {direction} than in a working run."


def checked_as(bug: Bug) -> str:
    """How ``bugzoo results validate`` compares the bug's runs with clean ones, in the summary's terms."""
    metric, direction = bug.check.metric, bug.check.direction
    if direction == "event":
        return f"{metric}, an event: in buggy runs more often than in clean runs"
    if direction == "varies":
        return f"{metric} differs between two runs of the same seed"
    return f"{metric} {direction} than in clean runs"


def bug_card(bug_id: str) -> str:
    """The full card of one bug: metadata, symptom, BUGGY and FIXED snippets, explanation."""
    b = get_bug(bug_id)
    wrap = lambda text: textwrap.fill(text, 96, initial_indent="  ", subsequent_indent="  ")  # noqa: E731
    return "\n".join([
        f"{b.id} — {b.title}",
        f"  category: {b.category}   {'LOUD (crashes or hangs)' if b.loud else 'silent'}",
        f"  models:   {', '.join(b.models)}",
        *(f"  not on {model}: {reason}" for model, reason in b.inapplicable.items()),
        f"  onset:    {b.onset_text}",
        f"  since:    bugzoo-bench {b.since}",
        f"  check:    {checked_as(b)}",
        *([f"  plants:   {planted(b)}"] if b.taxonomy else []),
        "", "SYMPTOM", wrap(b.symptom),
        "", "BUGGY", textwrap.indent(b.buggy, "  "),
        "", "FIXED", textwrap.indent(b.fixed, "  "),
        "", "WHY", wrap(b.explanation),
    ])


def planted(bug) -> str:
    """The taxonomy leaves a bug plants, each marked literal or partial."""
    return ", ".join(f"{key} ({value.split(':')[0]})" for key, value in bug.taxonomy.items())


def show_main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="bugzoo show", description="Show one bug's card.")
    parser.add_argument("bug")
    print(bug_card(parser.parse_args(argv).bug))
    return 0
