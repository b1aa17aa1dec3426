"""``bugzoo quiz``: spot-the-bug questions in the terminal, from real runs' symptoms.

Questions are drawn from the scenarios ``results/validity.csv`` proves (valid, not marked
unproven there nor in the scenario's file now), and a question is asked only when its own runs
show the symptom its check names, in the check's direction. Each question shows a buggy run
next to its clean control (sparklines, summary numbers and an anonymous PNG of the curves)
without naming the bug, offers four bugs to choose from, then reveals the bug's card: BUGGY
and FIXED code and the explanation. Answers are read from stdin line by line (a letter A-D), so
a quiz can be scripted. Runs come from ``bugzoo results validate``'s store when present, else
are made once with short settings and cached.
"""

from __future__ import annotations

import logging
import math
import os
import random
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import ALL_MODELS, CATEGORIES, Bug, flat_id, get_bug
from bugzoo.config import compose_run
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness import store
from bugzoo.harness.sweep import sweep
from bugzoo.judge.validity import plan_validity_runs
from bugzoo.scenarios import Scenario, list_scenarios
from bugzoo.teach.catalogue import bug_card

log = logging.getLogger(__name__)

LETTERS = "ABCD"
BARS = "▁▂▃▄▅▆▇█"
SHOWN = ("final_val_acc", "final_val_loss", "entropy_floor", "max_grad_norm", "nonfinite",
         "crashed")


@dataclass
class QuestionRuns:
    """What a question shows: buggy and clean traces and summaries of one scenario."""

    buggy: pd.DataFrame
    clean: pd.DataFrame
    buggy_summary: dict
    clean_summary: dict


def proven_scenarios(validity: Path) -> set[str] | None:
    """The scenarios the validity table at ``validity`` proves; None where there is none."""
    if not validity.is_file():
        return None
    table = pd.read_csv(validity, dtype={"unproven": str}, keep_default_na=False)
    return set(table.loc[table["valid"].astype(str).eq("True") & table["unproven"].eq(""),
                         "scenario"])


def candidate_scenarios(category: str | None, model: str | None,
                        proven: set[str] | None = None) -> list[Scenario]:
    """Buggy scenarios a question can be about, matching the filters: quick in-process runs on
    the CPU whose symptom one buggy run beside one clean run can show (not a symptom that two
    runs of one seed disagree), not marked unproven in their file, and among ``proven`` where
    it is given. Scenarios left out are left out quietly: the quiz prints only its questions."""
    chosen = []
    for s in list_scenarios():
        if (s.clean or s.isolate or s.unproven or s.skip_reason("cpu")
                or (proven is not None and s.id not in proven)):
            continue
        bug = get_bug(s.bug)
        if bug.check.direction == "varies":
            continue
        if (category and bug.category != category) or (model and s.model != model):
            continue
        chosen.append(s)
    return chosen


def distractors(bug: Bug, model: str, rng: random.Random) -> list[Bug]:
    """Three other bugs: same category first, then bugs of the same model."""
    ids = dict.fromkeys(s.bug for s in list_scenarios() if s.bug and s.bug != bug.id)
    unique = [get_bug(b) for b in ids]
    same_cat = [b for b in unique if b.category == bug.category]
    same_model = [b for b in unique if model in b.models and b not in same_cat]
    rest = [b for b in unique if b not in same_cat and b not in same_model]
    picked: list[Bug] = []
    for group in (same_cat, same_model, rest):
        rng.shuffle(group)
        picked += group[:3 - len(picked)]
    return picked


def _traces(root: Path, sweep_dir: str, scenario: str) -> tuple[pd.DataFrame, dict]:
    folder = root / sweep_dir / scenario
    runs = sorted(p.parent for p in folder.glob("seed*/summary.json"))
    if not runs:
        return pd.DataFrame(), {}
    trace = store.read_trace(runs[0]) if (runs[0] / "trace.parquet").is_file() else pd.DataFrame()
    return trace, store.read_summary(runs[0])


def question_runs(scenario: Scenario, stored: Path, cache: Path, steps: int) -> QuestionRuns:
    """Stored runs of ``scenario`` and its control, made (1 seed, short) and cached if missing.
    A bug that starts mid-run gets ``steps`` after its onset, so that its symptom can show.
    What the runs print (a library's warning names the file it came from, a progress bar names
    the scenario) is kept from the screen: it could name the bug."""
    for root in (stored, cache):
        if root == cache:
            onset = int(compose_run([f"scenario={scenario.id}"]).bug.onset)
            plan = plan_validity_runs(store.ensure_writable(root), [scenario.id], [0],
                                      [f"harness.steps={onset + steps}",
                                       "harness.eval_interval=10"])
            log.info("training the runs this question shows (%d, a few seconds, once: cached "
                     "in %s)", len(plan.tasks), root)
            with quiet_runs():  # no progress bar either: it names the scenarios
                sweep(plan.tasks, workers=1, progress=False)
        buggy, buggy_summary = _traces(root, "buggy", scenario.id)
        clean, clean_summary = _traces(root, "control", scenario.control)
        if buggy_summary and clean_summary:
            return QuestionRuns(buggy, clean, buggy_summary, clean_summary)
    raise UsageError(f"could not produce runs of scenario '{scenario.id}'")


def shows_symptom(bug: Bug, s: QuestionRuns) -> bool:
    """Whether the question's own runs show the bug's symptom: its check's metric, buggy
    against clean, in the check's direction (an event: in the buggy run and not the clean)."""
    buggy, clean = (summary.get(bug.check.metric) for summary in (s.buggy_summary,
                                                                   s.clean_summary))
    if bug.check.direction == "event":
        return bool(buggy) and not clean
    if buggy is None or clean is None:
        return False
    buggy, clean = float(buggy), float(clean)
    if not math.isfinite(clean):
        return False
    if not math.isfinite(buggy):  # a run that diverged is worse whichever way is worse
        return True
    return buggy > clean if bug.check.direction == "higher" else buggy < clean


def sparkline(values: list[float], lo: float, hi: float, width: int = 40) -> str:
    """Unicode bars of ``values`` resampled to ``width``; non-finite values show as '×'."""
    if not values:
        return "(no data)"
    count = min(width, len(values))
    picks = [values[int(i * len(values) / count)] for i in range(count)]
    span = (hi - lo) or 1.0
    return "".join("×" if not math.isfinite(v) else
                   BARS[min(len(BARS) - 1, max(0, int((v - lo) / span * len(BARS))))]
                   for v in picks)


def _series(trace: pd.DataFrame, column: str) -> list[float]:
    if trace.empty or column not in trace:
        return []
    values = trace[["step", column]].dropna(subset=[column])
    series = values[column].astype(float)
    if column == "loss":
        series = series.rolling(5, min_periods=1).mean()
    return series.tolist()


def describe(s: QuestionRuns, metric: str) -> str:
    """The symptom block: sparklines (shared scale per quantity) and summary numbers."""
    lines = []
    for column, label in (("loss", "training loss"), ("val_acc", "validation accuracy"),
                          ("grad_norm", "gradient norm (log)")):
        runs = {"clean": _series(s.clean, column), "buggy": _series(s.buggy, column)}
        if column == "grad_norm":
            runs = {k: [math.log10(v) if v > 0 else -math.inf for v in vs]
                    for k, vs in runs.items()}
        finite = [v for vs in runs.values() for v in vs if math.isfinite(v)]
        if not finite:
            continue
        lo, hi = min(finite), max(finite)
        lines.append(f"  {label} (from {lo:.3g} to {hi:.3g}):")
        lines += [f"    {name:5s} {sparkline(vs, lo, hi)}" for name, vs in runs.items()]
    lines.append("  observed:        buggy        clean")
    for key in dict.fromkeys((metric, *SHOWN)):
        b, c = s.buggy_summary.get(key), s.clean_summary.get(key)
        if b is not None or c is not None:
            lines.append(f"    {key:22s} {_fmt(b):>12s} {_fmt(c):>12s}"
                         + ("   <- the symptom check" if key == metric else ""))
    return "\n".join(lines)


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def draw(s: QuestionRuns, path: Path) -> Path:
    """An anonymous figure (no bug named) of the loss and validation accuracy curves."""
    fig = Figure(figsize=(8, 3))
    axes = fig.subplots(1, 2)
    for ax, column in zip(axes, ("loss", "val_acc"), strict=True):
        for name, trace, colour in (("clean", s.clean, "#1f77b4"), ("buggy", s.buggy, "#d62728")):
            if not trace.empty and column in trace:
                t = trace.dropna(subset=[column])
                ax.plot(t["step"], t[column], label=name, color=colour,
                        marker="o" if column == "val_acc" else None, ms=3)
        ax.set_title(column, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    return path


@contextmanager
def quiet_runs() -> Iterator[None]:
    """Python warnings off in this process and in the run processes it starts."""
    previous = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if previous is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = previous


def ask(prompt: str, choices: str = LETTERS) -> str:
    """One answer from stdin: a letter of ``choices`` (asked again after anything else), or ''
    at the end of input."""
    while True:
        print(prompt, end="", flush=True)
        line = sys.stdin.readline()
        if not sys.stdin.isatty():
            print(line.strip())
        answer = line.strip().upper()
        if not line or answer in choices and len(answer) == 1:
            return answer if line else ""
        print(f"  please answer with one letter: {', '.join(choices)}")


def quiz(n: int, seed: int, category: str | None, model: str | None, stored: Path,
         cache: Path, steps: int, png_dir: Path | None, proven: set[str] | None = None
         ) -> tuple[int, int]:
    """Run the quiz; returns (score, questions asked)."""
    candidates = candidate_scenarios(category, model, proven)
    if not candidates:
        raise UsageError("no proven scenario matches these filters")
    rng = random.Random(seed)
    chosen = []  # the first n drawn whose runs show their symptom, passed over quietly
    for scenario in rng.sample(candidates, len(candidates)):
        s = question_runs(scenario, stored, cache, steps)
        if shows_symptom(get_bug(scenario.bug), s):
            chosen.append((scenario, s))
        if len(chosen) == n:
            break
    score = 0
    for number, (scenario, s) in enumerate(chosen, 1):
        bug = get_bug(scenario.bug)
        options = [bug, *distractors(bug, scenario.model, rng)]
        rng.shuffle(options)
        print(f"\n=== Question {number}/{len(chosen)}: a {scenario.model} run went wrong "
              f"({s.buggy_summary.get('steps', '?')} steps, {s.buggy_summary.get('outcome')}) ===")
        print(describe(s, bug.check.metric))
        if png_dir is not None:
            print(f"  curves: {draw(s, png_dir / f'question{number}.png')}")
        print("Which bug is it?")
        for letter, option in zip(LETTERS, options, strict=False):
            print(f"  {letter}) {option.title}")
        answer = ask("Your answer (A-D): ", LETTERS[:len(options)])
        right = LETTERS[options.index(bug)]
        if answer == right:
            score += 1
            print("Correct!")
        else:
            print(f"Not quite: the answer is {right}.")
        print("\n" + bug_card(bug.id))
        curve = Path("results/curves") / f"{flat_id(bug.id)}.png"
        if curve.is_file():
            print(f"  symptom curves over seeds: {curve}")
    print(f"\nScore: {score}/{len(chosen)}")
    return score, len(chosen)


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo quiz", description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=5, help="number of questions (default 5)")
    p.add_argument("--seed", type=int, help="seed for a reproducible set (default: random)")
    p.add_argument("--category", help=f"only bugs of this category ({', '.join(CATEGORIES)})")
    p.add_argument("--model", help=f"only scenarios of this model ({', '.join(ALL_MODELS)})")
    p.add_argument("--runs", type=Path, default=Path("results/runs/validity"),
                   help="stored runs to show (from bugzoo results validate)")
    p.add_argument("--cache", type=Path, default=Path("results/runs/quiz"),
                   help="where missing runs are made and kept")
    p.add_argument("--steps", type=int, default=100, help="steps of runs made for the quiz")
    p.add_argument("--validity", type=Path, default=Path("results/validity.csv"),
                   help="the table whose proven scenarios questions are drawn from")
    p.add_argument("--png", type=Path, default=Path("results/runs/quiz/figures"),
                   help="folder for the question figures")
    p.add_argument("--no-png", action="store_true", help="no figures, text only")
    args = p.parse_args(argv)
    if args.category and args.category not in CATEGORIES:
        raise unknown_choice("category", args.category, CATEGORIES)
    if args.model and args.model not in ALL_MODELS:
        raise unknown_choice("model", args.model, ALL_MODELS)
    if args.n < 1 or args.steps < 10:
        raise UsageError("-n must be at least 1 and --steps at least 10")
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    print(f"bugzoo quiz (seed {seed}: rerun with --seed {seed} for the same questions)")
    proven = proven_scenarios(args.validity)
    if proven is None:
        log.warning("no %s: questions may be about scenarios whose symptom is not proven",
                    args.validity)
    quiz(args.n, seed, args.category, args.model, args.runs, args.cache, args.steps,
         None if args.no_png else args.png, proven)
    return 0
