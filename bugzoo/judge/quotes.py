"""The figures README and the guides quote, filled from ``results/`` and never typed by hand.

A page quotes a figure inline as ``<!--fig:NAME(ARGS)-->VALUE<!--/fig-->`` (an HTML comment,
so Markdown shows only the value), and a generated table as a block (``<!-- NAME:start -->``
... ``<!-- NAME:end -->``, :mod:`bugzoo.docblocks`). ``bugzoo results pages`` writes every value and
block from the committed results; ``bugzoo results pages --check`` (and ``tests/test_quotes.py``) lists
those that are stale. The sentence around a figure is free text: rewording it fails nothing.

A figure's arguments are separated by ", ". A key of a board's row (``board(suite: built-ins,
score)``) is an interval where the table has ``_lo`` and ``_hi`` columns for it, else the value
(an integer as an integer); ``KEY:SPEC`` formats it with a format spec (``overhead:.2f``).
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from bugzoo.bugs import list_bugs
from bugzoo.detector_registry import select_detectors
from bugzoo.docblocks import block, with_block
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness.sweep import parse_seeds, plan_runs, select_scenarios
from bugzoo.judge.bench import BENCH_SEEDS
from bugzoo.judge.lite import frozen_scenarios
from bugzoo.judge.outcomes import scored_sealed, with_suites
from bugzoo.judge.scoring import HEALTHY_LIMIT, apart_kind, detector_row, silent, without_honeypots
from bugzoo.judge.validity import ENTROPY_MARGIN, GENERATION_MARGIN
from bugzoo.paths import PACKAGE
from bugzoo.release import RELEASE

ROOT = PACKAGE.parent
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in
                              (ROOT / "docs" / "pages").glob("*.md")))
FIGURE = re.compile(r"<!--fig:([^>(]+)\(([^)]*)\)-->([^\n]*?)<!--/fig-->")
SUITE = "suite: built-ins"
PREVIOUS_BOARD = "1.5"  # the board of the release before, in history/, that "release" compares


class Results:
    """The committed results a page quotes, each file read once."""

    def __init__(self, folder: Path):
        self.folder = folder

    @functools.cache  # noqa: B019 - one Results per command
    def csv(self, name: str) -> pd.DataFrame:
        path = self.folder / name
        if not path.is_file():
            raise UsageError(f"a quoted figure reads {path}, which is missing")
        return pd.read_csv(path)

    @functools.cache  # noqa: B019
    def parquet(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(self.folder / name)

    def text(self, name: str) -> str:
        return (self.folder / name).read_text()

    @functools.cache  # noqa: B019
    def outcomes(self) -> pd.DataFrame:
        """The published outcomes with the suites as detectors of their own."""
        return with_suites(self.parquet("outcomes.parquet"))

    @functools.cache  # noqa: B019
    def suite(self, kind: str = "") -> pd.DataFrame:
        """The suite's outcomes on the headline's silent bugs (``kind`` "") or on the bugs
        visible at setup (``"visible"``), decoy pairs left out as the boards leave them."""
        table = without_honeypots(self.outcomes())[0]
        table = silent(table) if not kind else table[apart_kind(table) == kind]
        return table[table["detector"] == SUITE]


def interval(row: pd.Series, key: str) -> str:
    return f"{row[key]:.2f} [{row[f'{key}_lo']:.2f}, {row[f'{key}_hi']:.2f}]"


def cell(row: pd.Series, key: str) -> str:
    """``row``'s ``key`` as quoted: an interval, a formatted value, or the value as it is."""
    key, _, spec = key.partition(":")
    if spec:
        return format(row[key], spec)
    if f"{key}_lo" in row.index:
        return interval(row, key)
    value = row[key]
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def clock(seconds: float) -> str:
    whole, rest = divmod(round(seconds), 60)
    return f"{whole} min {rest:02d} s"


# ---------------------------------------------------------------------------- the figures
FIGURES: dict[str, Callable[..., str]] = {}


def figure(function: Callable[..., str]) -> Callable[..., str]:
    FIGURES[function.__name__] = function
    return function


def _row(table: pd.DataFrame, *index: str) -> pd.Series:
    keys = ["detector"] if len(index) == 1 else ["bug_set", "detector"]
    indexed = table.set_index(keys)
    where = index[0] if len(index) == 1 else tuple(index)
    if where not in indexed.index:
        raise unknown_choice("row", ", ".join(index), [str(i) for i in indexed.index])
    return indexed.loc[where]


# the boards a page quotes a row of: NAME(DETECTOR, KEY)
BOARDS = {"board": "leaderboard.csv", "visible": "leaderboard_visible.csv",
          "lite": "lite/leaderboard.csv", "lite_visible": "lite/leaderboard_visible.csv",
          "gpu_board": "gpu/catalogue_leaderboard.csv", "tools_board": "tools/leaderboard.csv"}


def _board_row(file: str) -> Callable[..., str]:
    def quoted(r: Results, detector: str, key: str) -> str:
        return cell(_row(r.csv(file), detector), key)
    quoted.__doc__ = f"A key of a detector's row of ``{file}``."
    return quoted


FIGURES.update({name: _board_row(file) for name, file in BOARDS.items()})


def _strongest_tools(r: Results) -> tuple[list[str], float]:
    board = r.csv("tools/leaderboard.csv")
    scores = board[board["role"] == "tool"].set_index("detector")["score"].round(2)
    return list(scores[scores == scores.max()].index), float(scores.max())


@figure
def strongest_tools(r: Results) -> str:
    """The tools with the highest score, at two decimals, on the tools board
    (``tools/leaderboard.csv``), ties named together."""
    names = [f"`{n}`" for n in _strongest_tools(r)[0]]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return listed + (" (tied at two decimals)" if len(names) > 1 else "")


@figure
def strongest_tool_score(r: Results) -> str:
    """The highest tool score on the tools board, at two decimals."""
    return f"{_strongest_tools(r)[1]:.2f}"


@figure
def history(r: Results, release: str, detector: str, key: str) -> str:
    """A row of an older release's board (``history/leaderboard-RELEASE.csv``)."""
    return cell(_row(r.csv(f"history/leaderboard-{release}.csv"), detector), key)


@figure
def out_of_sample(r: Results, bug_set: str, detector: str, key: str) -> str:
    """A row of the out-of-sample split (``out_of_sample.csv``)."""
    return cell(_row(r.csv("out_of_sample.csv"), bug_set, detector), key)


@figure
def out_of_sample_models(r: Results, models: str, column: str) -> str:
    """A cell of the suite's row on the models the detectors were tuned on, or on those that
    joined later, in ``out_of_sample.md`` (``bugs`` and ``pairs`` of ``N (P)``, or
    ``score``)."""
    found = re.search(rf"^\| {re.escape(models)}[^|]* \| {SUITE} \| (\d+) \((\d+)\) \| ([^|]+) \|",
                      r.text("out_of_sample.md"), re.M)
    if found is None:
        raise UsageError(f"out_of_sample.md has no row of {SUITE} on {models!r}")
    return dict(zip(("bugs", "pairs", "score"), found.groups(), strict=True))[column].strip()


@figure
def heuristics(r: Results) -> str:
    """How many heuristics the headline board holds."""
    return str(int((r.csv("leaderboard.csv")["role"] == "heuristic").sum()))


@figure
def sealed_heuristics(r: Results) -> str:
    """How many of the headline board's heuristics were scored sealed."""
    board = r.csv("leaderboard.csv")
    return str(int(((board["role"] == "heuristic")
                    & scored_sealed(board["scored"])).sum()))


@figure
def healthy_flag(r: Results) -> str:
    """Where the suite's healthy false-alarm rate stands against the board's flag."""
    rate = _row(r.csv("leaderboard.csv"), SUITE)["healthy_false_alarm_rate"]
    return f"{'above' if rate > HEALTHY_LIMIT else 'within'} the board's flag at {HEALTHY_LIMIT}"


@figure
def mirror(r: Results, kind: str, key: str) -> str:
    """A key of ``settings_reader``'s mirror (:func:`settings_mirror`) over the pairs of
    ``kind`` (``headline`` or ``visible``)."""
    return cell(settings_mirror(r.parquet("outcomes.parquet"),
                                "" if kind == "headline" else kind), key)


def settings_mirror(outcomes: pd.DataFrame, kind: str) -> pd.Series:
    """The board's row of ``settings_reader``'s mirror, an alarm at step 0 on exactly the runs
    it leaves quiet (off the model's defaults), scored by the board's own code on the published
    outcomes: over the pairs of the headline (``kind`` "") or of the bugs visible at setup
    ("visible"), and the healthy runs."""
    table = outcomes[(apart_kind(outcomes) == kind) | (outcomes["run_role"] == "clean")]
    runs = table[table["detector"] == "settings_reader"].copy()
    alarmed = runs["outcome"].isin(["hit", "false_alarm", "early"])
    buggy = runs["run_role"] == "buggy"
    before_onset = (runs["onset"].fillna(0) > 0) & (runs["run_role"] != "clean")
    runs["outcome"] = np.where(alarmed, np.where(buggy, "miss", "quiet"),
                               np.where(before_onset, "early",
                                        np.where(buggy, "hit", "false_alarm")))
    runs["alarm_step"] = np.where(alarmed, np.nan, 0.0)
    runs["delay_steps"] = np.where(runs["outcome"] == "hit", 0.0, np.nan)
    runs["diagnosed"] = False
    return pd.Series(detector_row(runs))


@figure
def sweep(r: Results, what: str) -> str:
    """The reference sweep's ``minutes``, ``clock`` (min and s), ``cores`` or ``runs``, every
    row of ``sweep_time.csv`` (a sweep stopped and resumed has several)."""
    return _sweep(r.csv("sweep_time.csv"), what)


@figure
def lite_sweep(r: Results, what: str) -> str:
    """The same of the Lite sweep (``lite/sweep_time.csv``)."""
    return _sweep(r.csv("lite/sweep_time.csv"), what)


def _sweep(table: pd.DataFrame, what: str) -> str:
    seconds = table["wall_s"].sum()
    values = {"minutes": f"{seconds / 60:.0f}", "clock": clock(seconds),
              "cores": str(int(table["cpus"].iloc[0])),
              "runs": f"{int(table['runs_made'].sum()):,}"}
    if what not in values:
        raise unknown_choice("sweep figure", what, values)
    return values[what]


@figure
def planned_runs(r: Results, plan: str) -> str:
    """How many runs ``bugzoo bench --full`` (``full``) or a plain ``bugzoo bench`` (``lite``)
    plans on this CPU-only checkout: every scenario it sweeps on as many seeds, each buggy run
    beside its twin, the decoy pairs, with the default detectors."""
    is_lite = plan == "lite"
    sweep_log = logging.getLogger("bugzoo.harness.sweep")
    level = sweep_log.level
    sweep_log.setLevel(logging.WARNING)  # not the CUDA-only scenarios skipped, one by one
    try:
        scenarios = frozen_scenarios() if is_lite else select_scenarios(None, device="cpu",
                                                                          controls=False)
    finally:
        sweep_log.setLevel(level)
    seeds = [0] if is_lite else parse_seeds(BENCH_SEEDS)
    planned = plan_runs(scenarios, seeds, [], select_detectors(["default"]), Path("unused"),
                        1.0, pairs=True, collect=True)
    return f"{len(planned):,}"


@figure
def lite_agreement(r: Results, what: str) -> str:
    """How Lite ranks the detectors against the full board (``lite_agreement.csv``): Kendall's
    ``tau`` over the ``ranked`` detectors that score above 0.05 on the full board, and how many
    of them are ``inside`` their full-board interval."""
    table = r.csv("lite_agreement.csv")
    ranked = table[table["full_score"] > 0.05]
    values = {"tau": f"{kendalltau(ranked['full_score'], ranked['lite_score']).statistic:.3f}",
              "ranked": str(len(ranked)), "inside": str(int(ranked["inside"].sum()))}
    return values[what]


@figure
def honeypots(r: Results, board: str) -> str:
    """What a board's honeypot column (``board``: a name of ``BOARDS``) says, in words."""
    if board not in BOARDS:
        raise unknown_choice("board", board, BOARDS)
    scores = r.csv(BOARDS[board])["honeypot_score"].dropna()
    above = int((scores != 0).sum())
    return ("every detector's honeypot score is 0.00" if not above else
            f"{above} of {len(scores)} detectors' honeypot scores are not 0.00")


@figure
def validity(r: Results, what: str) -> str:
    """How many buggy scenarios ``validity.csv`` holds (``rows``), proves ``manifest`` and
    marks ``unproven``."""
    table = r.csv("validity.csv")
    values = {"rows": len(table), "manifest": int(table["valid"].sum()),
              "unproven": int(table["unproven"].notna().sum())}
    return str(values[what])


@figure
def gpu_catalogue(r: Results, what: str) -> str:
    """The GPU pass's symptom agreement (``gpu/catalogue.csv``): ``same``, ``scenarios``,
    ``differs``; and ``mismatch_models``, how many models ``device_mismatch`` crashed on."""
    table = r.csv("gpu/catalogue.csv")
    values = {"same": int((table["agreement"] == "same").sum()), "scenarios": len(table),
              "differs": int((table["agreement"] == "differs").sum()),
              "mismatch_models": len(r.csv("gpu/device_mismatch.csv"))}
    return str(values[what])


@figure
def language(r: Results, what: str) -> str:
    """The causal LM over its seeds (``language.csv``): its ``excess`` over the language's
    entropy (min-max), the seeds ``within`` its margin, the margins, the ``generation_gap``."""
    table = r.csv("language.csv")
    values = {"excess": f"{table['excess'].min():.2f}-{table['excess'].max():.2f}",
              "within": f"{int(table['within'].sum())} of {len(table)}",
              "entropy_margin": f"{ENTROPY_MARGIN}", "generation_margin": f"{GENERATION_MARGIN}",
              "generation_gap": f"{table['generation_gap'].max():.2f}"}
    return values[what]


@figure
def gpt_bugs(r: Results, which: str) -> str:
    """How many bugs run on the causal LM: the ``llm`` bugs that joined with it, or the
    ``classic`` others."""
    on_gpt = [b for b in list_bugs() if "gpt" in b.models]
    llm = sum(b.since == "1.2" for b in on_gpt)
    return str(llm if which == "llm" else len(on_gpt) - llm)


@figure
def overhead(r: Results, variant: str, models: str) -> str:
    """``variant``'s median per-step ratio to the bare loop on each of ``models`` (separated by
    spaces), from ``perf/overhead.csv``, joined by " / "."""
    ratio = r.csv("perf/overhead.csv").set_index(["variant", "model"])["median_x"]
    return " / ".join(f"{ratio[variant, m]:.2f}" for m in models.split())


@figure
def step_ms(r: Results, model: str) -> str:
    """The bare loop's median step time on ``model``, in ms (``perf/overhead.csv``)."""
    table = r.csv("perf/overhead.csv").set_index(["variant", "model"])
    return f"{table.loc[('bare', model), 'step_ms']:.2f}"


@figure
def overhead_us(r: Results, variant: str, model: str) -> str:
    """What ``variant`` adds to ``model``'s median step, in microseconds: its ratio to the bare
    loop less one, times the bare loop's median step time (``perf/overhead.csv``)."""
    table = r.csv("perf/overhead.csv").set_index(["variant", "model"])
    bare_ms = table.loc[("bare", model), "step_ms"]
    return f"{(table.loc[(variant, model), 'median_x'] - 1) * bare_ms * 1000:.0f}"


@figure
def efficiency(r: Results, compositions: str, workers: str) -> str:
    """Sweep efficiency (``perf/sweep.csv``) with compositions ``kept`` or ``composed``."""
    table = r.csv("perf/sweep.csv").set_index(["compositions", "workers"])
    return f"{table.loc[(compositions, int(workers)), 'efficiency']:.2f}"


@figure
def rescore(r: Results, key: str) -> str:
    """A column of ``perf/rescore.csv``: rescoring stored traces sealed."""
    return cell(r.csv("perf/rescore.csv").iloc[0], key)


@figure
def validity_row(r: Results, scenario: str, key: str) -> str:
    """A key of one scenario's row of ``validity.csv``."""
    table = r.csv("validity.csv").set_index("scenario")
    if scenario not in table.index:
        raise unknown_choice("scenario of validity.csv", scenario, table.index)
    return cell(table.loc[scenario], key)


@figure
def effect(r: Results, scenario: str) -> str:
    """One scenario's effect against its control with its interval, signed, from
    ``validity.csv``."""
    row = r.csv("validity.csv").set_index("scenario").loc[scenario]
    return f"{row['effect']:+.3f} [{row['effect_lo']:+.3f}, {row['effect_hi']:+.3f}]"


@figure
def weakest_valid(r: Results) -> str:
    """The two valid scenarios with the highest q-values, and the higher q."""
    table = r.csv("validity.csv").set_index("scenario")
    weakest = table[table["valid"]].sort_values("q_value").tail(2)
    names = "` and `".join(sorted(weakest.index))
    return f"`{names}` (q = {weakest['q_value'].max():.3f})"


@figure
def category_recalls(r: Results) -> str:
    """The suite's recall per bug category, with the category's bugs in brackets."""
    table = r.csv("leaderboard_categories.csv")
    suite = table[table["detector"] == SUITE].sort_values("category")
    return ", ".join(f"{row.category} {row.recall:.2f} ({row.bugs})"
                     for row in suite.itertuples())


@figure
def baseline_walls(r: Results) -> str:
    """Each model's clean run's wall time (``perf/baselines.csv``, median of 3)."""
    table = r.csv("perf/baselines.csv")
    return ", ".join(f"{row.model} {row.wall_s_median_of_3:g} s" for row in table.itertuples())


@figure
def baseline(r: Results, model: str, key: str) -> str:
    """A key of one model's row of ``perf/baselines.csv``."""
    return cell(r.csv("perf/baselines.csv").set_index("model").loc[model], key)


@figure
def dev_runs(r: Results, what: str) -> str:
    """The published dev runs' time (``traces/runs.parquet``): how many ``runs``, their
    ``total_s``, the ``two_worker_min`` no sweep of them on 2 workers goes below, the
    ``control_share`` and ``clean_share`` of it, one scenario's ``mean_s(SCENARIO)``, the
    ``two_rank_s`` range."""
    runs = r.parquet("traces/runs.parquet")
    share = runs.groupby("role")["wall_s"].sum() / runs["wall_s"].sum()
    per_scenario = runs.groupby("scenario")["wall_s"].mean()
    two_ranks = per_scenario[[s for s in per_scenario.index
                              if s.endswith(("ddp_unsynced", "rank_skip"))]]
    if what.startswith("mean_s "):
        return f"{per_scenario[what.split()[1]]:.0f}"
    values = {"runs": f"{len(runs):,}", "total_s": f"{runs['wall_s'].sum():.0f}",
              "two_worker_min": f"{runs['wall_s'].sum() / 2 / 60:.0f}",
              "control_share": f"{share['control']:.0%}", "clean_share": f"{share['clean']:.0%}",
              "two_rank_s": f"{two_ranks.min():.0f}-{two_ranks.max():.0f}"}
    return values[what]


def _starting(table: pd.DataFrame, start: str) -> pd.Series:
    found = [p for p in table.index if str(p).startswith(start)]
    if not found:
        raise unknown_choice("row", start, [str(p) for p in table.index])
    return table.loc[found[0]]


@figure
def profile(r: Results, what: str) -> str:
    """The sweep profile (``perf/profile.csv``, ``perf/profile_sweep.csv``): how many pooled
    ``runs``; ``phase PHASE``'s share of their time; the ``small`` phases' shares; ``slot
    PART``'s share of the slot time; ``side_by_side``, how much longer the pooled runs take
    side by side than one after another."""
    phases = r.csv("perf/profile.csv").set_index("phase")["share"]
    slots = r.csv("perf/profile_sweep.csv").set_index("part")
    kind, _, name = what.partition(" ")
    if kind == "runs":
        return phases.index[-1].split()[1]
    if kind == "phase":
        return f"{_starting(phases, name):.0%}"
    if kind == "small":
        small = sorted({f"{_starting(phases, p):.0%}" for p in
                        ("build", "evaluation", "the twin run", "writing")})
        return "-".join(small).replace("%-", "-")
    if kind == "slot":
        return f"{_starting(slots, name)['share_of_slots']:.0%}"
    change = (_starting(slots, "held by pooled")["seconds"]
              / _starting(slots, "for comparison")["seconds"] - 1)
    return f"{abs(change):.0%} {'longer' if change >= 0 else 'less time'}"


@figure
def sweep_efficiency(r: Results, what: str) -> str:
    """The efficiency sweeps (``perf/sweep.csv``): their ``runs``, and the ``run_s`` range
    their runs added up to."""
    table = r.csv("perf/sweep.csv")
    seconds = sorted(f"{s:.0f}" for s in table["sum_run_s"])
    return str(table["runs"].iloc[0]) if what == "runs" else f"{seconds[0]} to {seconds[-1]}"


@figure
def telemetry(r: Results, part: str, model: str = "mlp", spec: str = ".0f") -> str:
    """Telemetry's cost per step, part by part (``perf/profile_telemetry.csv``, microseconds
    or ratios): the row starting ``part`` on ``model``, or ``floor``, the mlp's step with
    telemetry less the gradient statistics and both memory readings, against its bare step."""
    table = r.csv("perf/profile_telemetry.csv").set_index("us_per_step")

    def us(start: str, on: str = "mlp") -> float:
        return float(_starting(table, start)[on])

    if part == "floor":
        signals = us("gradient statistics") + us("resident memory") + us("heap in use")
        return f"{(us('training step') + us('telemetry') - signals) / us('training step'):.2f}"
    if part == "observation":
        return f"{us('the observation', model) + us('the trace row', model):{spec}}"
    return " / ".join(f"{us(part, m):{spec}}" for m in model.split())


@figure
def task_script_s(r: Results, model: str, what: str = "median") -> str:
    """Seconds one run of ``model``'s task scripts took (the exported buggy scripts, each once
    under ``bugzoo watch``, one thread: ``watch.csv``): their ``median`` or ``max``."""
    table = r.csv("watch.csv")
    runs = table[(table["kind"] == "exported") & (table["variant"] == "buggy")
                 & (table["model"] == model)]["seconds"]
    if runs.empty:
        raise UsageError(f"watch.csv holds no exported script of {model}")
    return f"{getattr(runs, what)():.1f}"


@figure
def task_set(r: Results, what: str) -> str:
    """How many exportable scenarios ``tasks.csv`` holds (``exportable``) and how many of them
    are tasks (``tasks``)."""
    table = r.csv("tasks.csv")
    return str(len(table) if what == "exportable" else int(table["in_set"].sum()))


@figure
def solved(r: Results, solver: str, model: str = "", what: str = "solved") -> str:
    """How many tasks ``solver`` solved in ``agents.csv`` (of ``model``'s, when given), or how
    many it was graded on (``what`` = ``graded``)."""
    table = r.csv("agents.csv")
    table = table[(table["solver"] == solver) & ((table["model"] == model) if model else True)]
    if table.empty:
        raise UsageError(f"agents.csv holds no grade of {solver} {model}".strip())
    return str(len(table) if what == "graded" else int(table["solved"].sum()))


@figure
def harmless_cpu_ratio(r: Results) -> str:
    """The largest CPU ratio of a harmless change to its clean script (``harmless.csv``), which
    the grader's CPU budget must allow."""
    return f"{r.csv('harmless.csv')['cpu_ratio'].max():.2f}"


@figure
def exported_pairs(r: Results, what: str) -> str:
    """How many exported pairs ``validity_exported.csv`` holds (``rows``) and proves
    (``valid``)."""
    table = r.csv("validity_exported.csv")
    return str(len(table) if what == "rows" else int(table["valid"].sum()))


@figure
def misses(r: Results, what: str, kind: str = "") -> str:
    """The suite's ``missed`` buggy runs or all its ``buggy`` runs, on the headline or on the
    bugs ``visible`` at setup; or one scenario's missed runs (``what`` its id)."""
    buggy = r.suite(kind)
    buggy = buggy[buggy["run_role"] == "buggy"]
    missed = buggy[buggy["outcome"] == "miss"]
    if what in ("missed", "buggy"):
        return str(len(missed if what == "missed" else buggy))
    return str(int((missed["scenario"] == what).sum()))


def first_alarms(r: Results, role: str) -> pd.DataFrame:
    """The false alarms of the suite on runs of ``role`` (``control``: twins; ``clean``:
    healthy variants), each under the member that alarmed first."""
    suite = r.suite()
    alarmed = suite[(suite["run_role"] == role) & (suite["outcome"] == "false_alarm")]
    table = silent(r.outcomes())
    members = table[(table["role"] == "heuristic") & (table["outcome"] == "false_alarm")]
    return members.merge(alarmed[["scenario", "seed", "run_role", "alarm_step"]])


@figure
def false_alarms(r: Results, role: str, what: str) -> str:
    """The suite's false alarms on runs of ``role``: how many runs it ``alarmed`` on, of how
    many ``runs``; a member's count (``what`` its name, each run under the member that alarmed
    first), or ``steps MEMBER``, the steps its alarms came at."""
    suite = r.suite()
    runs = suite[suite["run_role"] == role]
    if what == "runs":
        return str(len(runs))
    if what == "alarmed":
        return str(int((runs["outcome"] == "false_alarm").sum()))
    first = first_alarms(r, role)
    if what.startswith("steps "):
        steps = first.loc[first["detector"] == what.split()[1], "alarm_step"]
        low, high = int(steps.min()), int(steps.max())
        return f"step {low}" + (f"-{high}" if high > low else "")
    return str(int((first["detector"] == what).sum()))


# ---------------------------------------------------------------------------- the blocks
def headline_table(r: Results) -> str:
    """The headline table of the scoring page, from the leaderboard."""
    b = r.csv("leaderboard.csv").set_index("detector")
    suite = b.loc[SUITE]
    judged = int(suite["hits"] + suite["misses"])
    groups = [("always_alarm", "never_alarm", "random_alarm"),
              ("settings_reader", "trace_memoriser")]
    return "\n".join([
        "| | this board (test split, paired) |", "|---|---|",
        f"| `{SUITE}`, score | {interval(suite, 'score')} |",
        f"| `suite: sealed`, score | {interval(b.loc['suite: sealed'], 'score')} |",
        f"| `suite: generic`, score | {interval(b.loc['suite: generic'], 'score')} |",
        f"| `{SUITE}`, recall | {interval(suite, 'recall')} ({int(suite['hits'])} "
        f"hits of {judged} judged pairs, {int(suite['early'])} early) |",
        f"| `{SUITE}`, control alarms | {interval(suite, 'matched_false_alarm_rate')} "
        f"({int(suite['control_alarms'])} of {judged} twins) |",
        f"| `{SUITE}`, healthy false alarms | {interval(suite, 'healthy_false_alarm_rate')} "
        f"({int(suite['false_alarms'])} of {int(suite['clean_runs'])} runs) |",
        f"| `{SUITE}`, diagnosis accuracy | {interval(suite, 'diagnosis_accuracy')} |",
        f"| `{SUITE}`, median delay, bugs from step 0 / mid-run bugs | "
        f"{suite['median_delay_steps']:g} / {suite['median_delay_steps_midrun']:g} steps |",
        f"| `{SUITE}`, a run's time with the suite / the bare loop's | "
        f"{suite['overhead']:.2f} x |",
        *(f"| {' / '.join(f'`{d}`' for d in names)}, score | "
          f"{' / '.join(interval(b.loc[d], 'score') for d in names)} |" for names in groups)])


def moves_table(r: Results) -> str:
    """Each detector's score on the 0.1 board beside the 1.0 board, in the 1.0 board's order."""
    old = r.csv("history/leaderboard-0.1.csv").set_index("detector")
    new = r.csv("history/leaderboard-1.0.csv").set_index("detector")
    rows = ["| detector | 0.1: dev seeds, every clean run | 1.0: test split, paired |",
            "|---|---|---|"]
    for detector, row in new.iterrows():
        before = interval(old.loc[detector], "score") if detector in old.index else "–"
        rows.append(f"| `{detector}` | {before} | {interval(row, 'score')} |")
    return "\n".join(rows)


def release_table(r: Results) -> str:
    """The suites on this board beside the previous release's board (``PREVIOUS_BOARD``)."""
    old = r.csv(f"history/leaderboard-{PREVIOUS_BOARD}.csv").set_index("detector")
    new = r.csv("leaderboard.csv").set_index("detector")
    rows = [f"| | {PREVIOUS_BOARD}: in-process | {RELEASE.split()[-1]}: as scored |",
            "|---|---|---|"]
    for suite in ("suite: built-ins", "suite: sealed", "suite: generic"):
        rows.append(f"| `{suite}`, scored | "
                    f"{old.loc[suite, 'scored'] if suite in old.index and 'scored' in old else '–'}"
                    f" | {new.loc[suite, 'scored']} |")
        for key, label in (("score", "score"), ("recall", "recall"),
                           ("matched_false_alarm_rate", "control alarms"),
                           ("healthy_false_alarm_rate", "healthy false alarms")):
            before = interval(old.loc[suite], key) if suite in old.index else "–"
            rows.append(f"| `{suite}`, {label} | {before} | {interval(new.loc[suite], key)} |")
    return "\n".join(rows)


def out_of_sample_table(r: Results) -> str:
    """The out-of-sample table of the scoring page: the bugs the detectors were tuned on, every
    later bug, and each later release's apart."""
    table = r.csv("out_of_sample.csv").set_index(["bug_set", "detector"])
    releases = sorted(b.split()[1] for b in table.index.levels[0] if b.startswith("joined "))
    sets = [table.loc["tuned-on"], table.loc["unseen"],
            *(table.loc[f"joined {release}"] for release in releases)]
    header = ["tuned on: 1.0's bugs", "unseen: all later bugs",
              *(f"of which {release}'s" for release in releases)]
    rows = ["| | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|",
            "| silent bugs (pairs) | " + " | ".join(
                f"{int(t.loc[SUITE, 'bugs'])} ({int(t.loc[SUITE, 'pairs'])})"
                for t in sets) + " |"]
    for detector, key, label in ((SUITE, "score", "score"), (SUITE, "recall", "recall"),
                                 (SUITE, "matched_false_alarm_rate", "control alarms"),
                                 ("suite: generic", "score", "score")):
        rows.append(f"| `{detector}`, {label} | "
                    + " | ".join(interval(t.loc[detector], key) for t in sets) + " |")
    return "\n".join(rows)


BLOCKS: dict[str, Callable[[Results], str]] = {
    "headline": headline_table, "moves": moves_table, "release": release_table,
    "out-of-sample": out_of_sample_table}


# ---------------------------------------------------------------------------- filling pages
def value_of(r: Results, name: str, args: str) -> str:
    """The figure ``name(args)`` from ``r``."""
    if name not in FIGURES:
        raise unknown_choice("quoted figure", name, FIGURES)
    try:
        return FIGURES[name](r, *[a for a in args.split(", ") if a])
    except UsageError as e:
        raise UsageError(f"quoted figure {name}({args}): {e}") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise UsageError(f"quoted figure {name}({args}) cannot be made from {r.folder}: "
                         f"{type(e).__name__} {e}") from None


def filled(text: str, r: Results) -> str:
    """``text`` with every quoted figure and generated block written from ``r``."""
    text = FIGURE.sub(lambda m: f"<!--fig:{m[1]}({m[2]})-->{value_of(r, m[1], m[2])}"
                                "<!--/fig-->", text)
    for name, make in BLOCKS.items():
        if block(text, name) is not None:
            text = with_block(text, name, make(r))
    return text


def stale(text: str, r: Results) -> list[str]:
    """Each figure and block of ``text`` that is not what ``r`` says, quoted then current."""
    quoted = [(m, value_of(r, m[1], m[2])) for m in FIGURE.finditer(text)]
    found = [f"{m[1]}({m[2]}): {m[3]!r}, results say {value!r}" for m, value in quoted
             if m[3] != value]
    found += [f"block {name}" for name, make in BLOCKS.items()
              if (quoted := block(text, name)) is not None and quoted != make(r).rstrip("\n")]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="bugzoo results pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing: list the stale figures and exit 1 if any")
    parser.add_argument("--results", type=Path, default=ROOT / "results",
                        help="the results folder the figures come from (default: results/)")
    args = parser.parse_args(argv)
    if not (ROOT / "README.md").is_file():
        raise UsageError(f"bugzoo results pages writes the pages of a checkout; {ROOT} is not one")
    r, found = Results(args.results), []
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()
        if args.check:
            found += [f"{page}: {line}" for line in stale(text, r)]
        elif (new := filled(text, r)) != text:
            path.write_text(new)
            print(f"wrote {page}")
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0
