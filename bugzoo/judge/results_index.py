"""``results/README.md``: what each file under ``results/`` is, the command that made it, and how
to read it.

A page names its own command in a line "Regenerate with `...`" or "Made by `...`", and its title
is its first heading; the tables beside it (same folder, same stem, or the stem and ``_...``)
belong to it. Files without such a page have a fixed entry here. A file that no entry covers is
an error, so the index cannot fall behind the folder. Write it with
``bugzoo results index``; ``tests/test_docs.py`` checks the committed copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bugzoo.errors import ArgumentParser, UsageError

INDEX = "README.md"
IGNORED = {"runs", "report"}  # raw runs and the HTML report: made locally, never committed
# the order of the rows: the reference figures first, then the folders
ORDER = ("leaderboard", "recall_by_category", "unproven_effects", "overhead", "sweep_time",
         "split", "release", "validity", "health", "coverage", "tools", "perf/", "curves/", "traces/",
         "gpu/", "history/")
COMMAND = re.compile(r"(?:Regenerate with|Made by) (`[^`]+`(?: then `[^`]+`)*)")


@dataclass(frozen=True)
class Entry:
    """One row of the index: the files, what they are, and the command that made them."""

    files: tuple[str, ...]  # paths relative to results/; the first is the page, if any
    what: str
    command: str
    linked: bool = True  # the first file is a page to link to


# what a page's title leaves out, keyed by the page's path under results/
NOTES = {
    "leaderboard.md": "every detector a plain `bugzoo bench` runs, scored on the test split; "
                      "`leaderboard_categories.csv` and `leaderboard_bugs.csv` break it down, "
                      "`leaderboard_loud.csv`, `leaderboard_unproven.csv` and "
                      "`leaderboard_visible.csv` score loud, unproven and setup-visible bugs "
                      "apart",
    "validity.md": "each buggy scenario's symptom test against its matched control, unproven "
                   "scenarios measured too",
    "perf/overhead.md": "step-time overhead of telemetry, of each detector alone and of the "
                        "suites, per model",
    "perf/baselines.md": "initial loss, single-batch overfit, accuracy and wall time per model",
    "perf/sweep.md": "the same sweep on 1 worker and on 2",
    "perf/rescore.md": "the sealed built-ins scored on the stored dev traces, sealed (a "
                       "confined job per run) beside the same in one process",
    "perf/changed.md": "what the `--changed` commands redo after typical edits (a comment, "
                       "a docstring, `summarize`, one solver, one detector, a sweep's "
                       "bookkeeping), under each key scheme: hand-listed files, the code "
                       "reached with whole modules, the definitions reached",
    "perf/suite.md": "README's test command against its 8-minute budget, with a reference run "
                     "that gives the machine's speed that day; `perf/suite.csv` per test file",
    "perf/profile.md": "each phase of a bench's runs, the pool's slots held and idle "
                       "(`perf/profile_sweep.csv`), and telemetry's parts per step on each "
                       "model (`perf/profile_telemetry.csv`)",
}
# files that no page names the command of
FIXED = [
    Entry(("leaderboard.png",), "Each detector's score with its 95% interval over bugs",
          "`bugzoo score results/runs/test --publish`"),
    Entry(("recall_by_category.png",), "Recall of each detector and suite per bug category "
          "(baselines and integrity rows left out)", "`bugzoo score results/runs/test --publish`"),
    Entry(("unproven_effects.csv",), "Each unproven scenario's declared symptom, buggy minus "
          "control, median over the test split's seeds with its interval",
          "`bugzoo score results/runs/test --publish`", linked=False),
    Entry(("overhead.csv",), "What each detector and suite costs a user per model (`paid_x`: "
          "a whole run with it over the bare loop's, setup, twin run and teardown included), as "
          "the reference bench measured it; the leaderboard's overhead column averages it",
          "`bugzoo bench --split test --sweep test`", linked=False),
    Entry(("outcomes.parquet",), "Every run's outcome for every detector and suite member of "
          "the reference bench (alarm step, delay, diagnosis, pair role): the board's input, "
          "from which `leaderboard(...)` recomputes it", "`bugzoo score results/runs/test "
          "--publish`", linked=False),
    Entry(("sweep_time.csv",), "The wall time of the reference bench: runs made, workers, "
          "cores, one row per command (a command stopped by Ctrl-C or SIGTERM records its "
          "part, and the one that resumes the sweep adds its own)",
          "`bugzoo bench --split test --sweep test`", linked=False),
    Entry(("split.json",), "The test split the reference board was scored on: its training "
          "seeds and data-seed offsets, drawn from OS entropy, and when",
          "`bugzoo bench --split test --sweep test`", linked=False),
    Entry(("history/*",), "Earlier reference boards, kept to show what moved each figure: "
          "0.1 (run-level J over seeds 0-2, each buggy run against every clean run) and 1.0 "
          "(the paired test-split board of the 43 bugs of bugzoo-bench 1.0), and the real tools "
          "on the 0.1 scoring (`tools-0.1.md`, its commands in it)",
          "0.1: `bugzoo bench` then `bugzoo score results/runs/bench --publish` (bugzoo 0.1.0); "
          "1.0: `bugzoo bench --split test --sweep test` then `bugzoo score results/runs/test "
          "--publish` (bugzoo 1.0.0)", linked=False),
    Entry(("release.json",), "The release's manifest: every scenario's config, bug code and "
          "data generator hashes, the shared code's hash and the release digest every run "
          "carries", "`bugzoo results release`", linked=False),
    Entry(("tools/*",), "The tools sweep's scored tables, which `tools.md` is made of: its "
          "leaderboard, categories, outcomes, split, sweep time and overhead",
          "`bugzoo bench --detectors default cockpit lightning_spikes hf_overflow "
          "torch_grad_norm --sweep tools` then `bugzoo results tools`", linked=False),
    Entry(("lite/*",), "The bugzoo-bench Lite board, sealed: its leaderboard and tables as "
          "`results/` holds the full board's, its outcomes, split, sweep time and overhead",
          "`bugzoo bench` then `bugzoo score results/runs/lite --publish`", linked=False),
    Entry(("lite.json",), "bugzoo-bench Lite's frozen scenarios and the rule that chose them, "
          "which reads no run: what a plain `bugzoo bench` sweeps", "`bugzoo lite --freeze`",
          linked=False),
    Entry(("lite_agreement.md", "lite_agreement.csv"), "Lite against the full board on the "
          "published test split's own runs: Kendall's tau over the detectors, and whether "
          "each one's Lite score falls inside its full-board interval",
          "`bugzoo lite --agreement`"),
    Entry(("validity_exported.md", "validity_exported.csv"), "Exported pairs: each exportable "
          "scenario's buggy script against its fixed twin over 5 seeds, with the catalogue's "
          "test (and its retest over 10 seeds)", "`bugzoo task validate`"),
    Entry(("watch.md", "watch.csv", "watch_times.csv"), "`bugzoo watch` on scripts bugzoo "
          "does not run: every valid exported pair's buggy and fixed script, and five clean "
          "tutorial-style loops, beside the board's rates; the watch's overhead",
          "`bugzoo task watched`"),
    Entry(("tasks.md", "tasks.csv"), "The find-and-fix task set: every exportable scenario "
          "made a task, and whether the grader tells its buggy script from its fixed one (only "
          "those are tasks); the CSV keeps each row's key for `--changed`",
          "`bugzoo task set --out results/runs/tasks`"),
    Entry(("agents.md", "agents.csv"), "Reference solvers (`noop`, `oracle`, `oracle_variant`, "
          "`rules`) "
          "on the task set, each submission graded by retraining: diagnosed, healthy and "
          "solved rates over tasks with 95% intervals, and solved per model; the CSV has one "
          "row per solver and task",
          "`bugzoo task agents --set results/runs/tasks`"),
    Entry(("health.csv",), "Every clean scenario's validation accuracy over 5 seeds beside its "
          "model's default (also a section of `validity.md`)", "`bugzoo results validate`",
          linked=False),
    Entry(("language.csv",), "The causal language model on its defaults over 5 seeds: its "
          "validation loss beside the source's entropy, and its generation gap, each against "
          "its stated margin (also the last section of `validity.md`)", "`bugzoo results validate`",
          linked=False),
    Entry(("curves/*.png", "curves/*.parquet"), "Symptom curves per bug (`<bug>.png`, and "
          "`<bug>-midrun.png` for bugs that start mid-run), with the plotted data",
          "`bugzoo curves <bug>`", linked=False),
    Entry(("traces/*",), "The published dev sweep's observations (seeds 0-2, each buggy run "
          "beside its disarmed twin) as one compact trace set, for `bugzoo replay "
          "results/traces`; `command.txt` records the commands and versions",
          "`bugzoo bench --sweep dev --detectors never_alarm --no-overhead` then "
          "`bugzoo results traces export results/runs/dev`", linked=False),
]

GUIDE = """\
## Reading the leaderboard

`leaderboard.md` scores each detector on how well it tells buggy runs from their controls, on
the test split (training and data seeds drawn fresh, `split.json`). Each buggy run is paired
with its matched control, its disarmed twin: the same configuration and seeds, the plant
installed without its effect. The **score** is the macro-averaged paired Youden's J: per bug,
the mean over its runs of (an alarm on the buggy run from the onset on) minus (the same on its
twin); then the mean over bugs, so that each bug counts once. *Recall* and the *matched
false-alarm rate* are the two halves. An alarm before the onset is *early*: the two runs are
then still one, and it scores nothing either way. The *healthy false-alarm rate* counts
alarms on healthy variants (clean scenarios that control no bug), its own column, flagged above
0.05. A detector that detects nothing scores about 0: the baselines (`always_alarm`,
`never_alarm`, `random_alarm`) and the integrity rows (`settings_reader`, `trace_memoriser`)
show it. Intervals resample bugs (buggy side) and clean scenarios (healthy side); where every
cluster shows 0 or 1, the exact Clopper-Pearson interval over the clusters. `suite:` rows count a
run by the first alarm of any of bugzoo's own detectors (`suite: generic` by those that watch a
general signal only). Loud bugs (a crash or a hang) and unproven scenarios are scored apart, in
their own CSVs; `unproven_effects.csv` shows each unproven scenario's measured effect.

## Reading validity

`validity.md` tests each buggy scenario's declared symptom, always an outcome a practitioner
sees (validation loss or accuracy, the validation-holdout gap, the serving gap, a crash, a hang,
divergence, memory, step time, or two runs of one seed that disagree), never the variable the
bug sets. Buggy runs meet runs of the matched control over 5 seeds. The p-values are exact: a
permutation test of rank sums for metrics (5 against 5 seeds cannot go below 1/252), Fisher's
exact test for events. Benjamini-Hochberg q-values run across every scenario tested, and a
scenario is valid at q < 0.01. Each effect (difference of medians, or of event rates) carries a
95% bootstrap interval. Unproven scenarios give their measured reason and are expected not to
manifest. A scenario not valid over 5 seeds although its effect interval excludes 0 is tested
again over 10. The last section, and `health.csv`, hold the healthy variants: each must train within
0.10 validation accuracy of its model's default in every seed.

## Reading the speed tables

`perf/overhead.md` gives each variant's step time relative to the bare loop (no telemetry, no
detectors) as `median_x / mean_x`: the ratio of median step times, then of mean step times,
which also counts work done on some steps only; `overhead.csv` (the reference bench's) adds
`paid_x`, a whole run's time with setup, twin run and teardown. Each variant steps in blocks interleaved with the
bare loop's, in a process of its own with one thread. `perf/sweep.md`'s efficiency is the serial
sweep's summed run time divided by the workers, over the sweep's wall time. `perf/baselines.md`
is the clean models on their defaults: initial loss against log C, the step at which a single
batch is overfit, accuracies and wall time.

## Curves and traces

A curves figure puts each buggy scenario beside its clean control: the median over seeds as a
line, min to max as a band, clean in blue and buggy in red, the onset dashed, the first
non-finite loss dotted. The `.parquet` beside each figure holds the plotted data. The trace set
under `traces/` holds every reference run's per-step observations, per-layer gradient norms and
plain facts, which is all an observation-only detector reads, so `bugzoo replay
results/traces` scores such a detector on the whole catalogue without training.

## The GPU pass

`gpu/` is what `bugzoo results gpu` measured on a CUDA machine. Each stage writes `<stage>.md`, naming
the device, the torch version and the commands it ran, and its tables, whose first two columns
are the device and the torch version. The CPU files above are the bitwise-reproducible
reference; compare GPU figures with them as distributions, not run for run.
"""


def result_files(results: Path) -> list[Path]:
    """Every file under ``results``, sorted, except the ignored run and report folders."""
    return sorted(p for p in results.rglob("*") if p.is_file()
                  and p.relative_to(results).parts[0] not in IGNORED
                  and not p.name.startswith("."))


def page_entry(results: Path, page: Path, names: list[str]) -> Entry:
    """The entry of a page that names its command, with the tables beside it."""
    text = page.read_text()
    title = text.splitlines()[0].lstrip("# ").strip()
    found = COMMAND.search(text)
    if not found:
        raise ValueError(f"{page} names no 'Regenerate with' or 'Made by' command")
    rel = page.relative_to(results).as_posix()
    tables = [n for n in names if n != rel and Path(n).parent == Path(rel).parent
              and re.fullmatch(rf"{re.escape(page.stem)}(_.*)?\.\w+", Path(n).name)]
    what = f"{title}: {NOTES[rel]}" if rel in NOTES else title
    return Entry((rel, *tables), what, found.group(1))


def covered(entry: Entry, names: list[str]) -> set[str]:
    """The ``names`` that ``entry``'s patterns match (a pattern holds the folder too)."""
    return {n for pattern in entry.files for n in names
            if Path(n).match(pattern) and n.count("/") == pattern.count("/")}


def order(entry: Entry) -> tuple[int, str]:
    """Sort key: the top-level pages in ``ORDER``, then the folders' rows by path."""
    first = entry.files[0]
    return next((i for i, p in enumerate(ORDER) if first.startswith(p)), len(ORDER)), first


def entries(results: Path) -> list[Entry]:
    """The index's rows; raises ValueError naming any file that no row covers."""
    names = [p.relative_to(results).as_posix() for p in result_files(results)
             if p.relative_to(results).as_posix() != INDEX]
    rows = [e for e in FIXED if covered(e, names)]
    fixed = {n for e in rows for n in covered(e, names)}
    rest = [n for n in names if n not in fixed]  # a page's tables are not another row's
    rows += [page_entry(results, results / n, rest) for n in rest if n.endswith(".md")]
    if missing := sorted(set(names).difference(*(covered(e, names) for e in rows))):
        raise ValueError(f"no entry in bugzoo/judge/results_index.py covers {missing}")
    return sorted(rows, key=order)


def cell(entry: Entry) -> str:
    """The files column: a link to the page, the tables as code."""
    first, *rest = entry.files
    head = f"[`{first}`]({first})" if entry.linked else f"`{first}`"
    return ", ".join([head, *(f"`{n}`" for n in rest)])


def render(results: Path) -> str:
    """The text of ``results/README.md``."""
    lines = ["# Results", "",
             "The committed reference outputs of bugzoo. Each row names the command that "
             "regenerates it; raw runs go to `results/runs/`, which is not committed. This page "
             "is made by `bugzoo results index` (`bugzoo/judge/results_index.py`): edit that module, not this "
             "file.", "",
             "| files | what | made by |", "|---|---|---|"]
    lines += [f"| {cell(e)} | {e.what} | {e.command} |" for e in entries(results)]
    return "\n".join(lines) + "\n\n" + GUIDE


def write(results: Path, out: Path | None = None) -> Path:
    """Write the index of ``results`` to ``out`` (default ``results/README.md``)."""
    out = out or results / INDEX
    out.write_text(render(results))
    return out


def main(argv: list[str] | None = None) -> int:
    """``bugzoo results index [--results DIR] [--out FILE]``."""
    p = ArgumentParser(prog="bugzoo results index", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path("results"), help="default: results")
    p.add_argument("--out", type=Path, help="default: <results>/README.md")
    args = p.parse_args(argv)
    try:
        print(write(args.results, args.out))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return 0
