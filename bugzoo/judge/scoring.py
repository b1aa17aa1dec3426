"""Score a sweep: paired scores that reward discrimination only, with intervals over bugs.

Every buggy run is judged against its own matched control: its disarmed twin, trained with the
same configuration and the same seeds (:mod:`bugzoo.judge.outcomes`). Over the same stretch,
from the bug's onset to the last step the buggy run reached, a *hit* is an alarm on the buggy
run with none before the onset, and a *control alarm* the same on its twin. Before the onset
the two runs are one and the same, so an early alarm scores nothing either way; after a buggy
run stops (a crash, a divergence, a hang), its twin has no counterpart to be told apart from,
so an alarm there is not a control alarm (else alarms at random steps would score below 0).

The primary **score** is the macro-averaged paired Youden's J: per bug, the mean over its runs
of (hit) minus (control alarm); then the mean over bugs, so that a bug counts once however many
scenarios it has. A detector that detects nothing (a constant, a coin, one that reads the run's
settings, one that reads the bug's label in its twin as well) alarms alike on both runs of a
pair, and scores 0. **recall** and the **matched false-alarm rate** are the two halves, over
the pairs where the detector was quiet before the onset. The **healthy false-alarm rate** is
the share of healthy variants' runs with an alarm, a column of its own: a detector over
``HEALTHY_LIMIT`` there is flagged.

Intervals resample what generalises: bugs for the buggy side, clean scenarios for the healthy
side (95% percentile bootstrap, ``BOOTSTRAP`` resamples). Where every cluster shows the same
rate, 0 or 1, the bootstrap has nothing to vary, and the interval is the exact Clopper-Pearson
interval over the clusters. Loud bugs (a crash, a hang), unproven ones (no symptom proven in
their setting) and bugs visible at setup are scored apart. A bug is *visible at setup* when its
buggy run and its twin differ in what a detector reads before the first step, without the seeds
(:mod:`bugzoo.harness.setup_digest`: settings, types, module tree, shapes): there a strategy that
merely knows the catalogue's defaults tells the pair apart, so the pair is no blind control.
Off them, any strategy that reads only the setup alarms alike on both runs of every pair and
scores exactly 0.
"""

from __future__ import annotations

import logging
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from bugzoo import versions
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.judge.figures import category_figure, leaderboard_figure
from bugzoo.judge.outcomes import (
    SETUP_READER,
    one_code,
    outcomes,
    setup_reader_rows,
    visible_at_setup,
    with_suites,
)
from bugzoo.judge.sealed import score_sweep_sealed, sealed_selection
from bugzoo.judge.stats import BOOTSTRAP, clopper_pearson
from bugzoo.judge.templates import render as render_page
from bugzoo.registry import OWN_DISTRIBUTION

log = logging.getLogger(__name__)

HEALTHY_LIMIT = 0.05  # a healthy false-alarm rate above this is flagged on the board
HONEYPOT_FLAG = "scores on honeypots"
OVERHEAD_FILE = "overhead.csv"
PUBLISH_HERE = ""  # ``--publish`` with no folder: results/ (results/lite/ for a Lite sweep)
PUBLISHED_OUTCOMES = "outcomes.parquet"  # the published board's input, one row per run and detector


# ----------------------------------------------------------------------------- intervals
def cluster_interval(values: np.ndarray, stat: Callable = np.mean, rate: bool = False,
                     seed: int = 0) -> tuple[float, float, float]:
    """``stat`` of per-cluster ``values`` with its 95% percentile-bootstrap interval over the
    clusters. For a ``rate`` that every cluster has at 0 (or 1), the exact Clopper-Pearson
    interval over the clusters instead (a bootstrap would say [0, 0])."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    if rate and (np.all(x == 0) or np.all(x == 1)):
        return clopper_pearson(int(x.sum()), len(x))
    rng = np.random.default_rng(seed)
    draws = stat(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(stat(x)), float(lo), float(hi)


def pooled_interval(groups: list[np.ndarray], stat: Callable = np.median,
                    seed: int = 0) -> tuple[float, float, float]:
    """``stat`` of the values of every group, with its 95% interval from resampling groups
    (bugs), each bringing all its values."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    groups = [g[np.isfinite(g)] for g in groups]
    groups = [g for g in groups if len(g)]
    if not groups:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = [stat(np.concatenate([groups[i] for i in pick]))
             for pick in rng.integers(0, len(groups), size=(BOOTSTRAP, len(groups)))]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(stat(np.concatenate(groups))), float(lo), float(hi)


def _columns(name: str, value: tuple[float, float, float]) -> dict:
    return {name: value[0], f"{name}_lo": value[1], f"{name}_hi": value[2]}


# ----------------------------------------------------------------------------- pairs
APART_KINDS = ("loud", "unproven", "visible")  # scored apart, in this order of precedence


def apart_kind(table: pd.DataFrame) -> pd.Series:
    """Per row, the board it is scored apart on (``APART_KINDS``), or "" for the headline:
    loud bugs, then unproven scenarios, then bugs visible at setup."""
    kind = pd.Series("", index=table.index)
    kind[visible_at_setup(table)] = "visible"
    kind[table["unproven"]] = "unproven"
    kind[table["loud"]] = "loud"
    return kind


def silent(table: pd.DataFrame) -> pd.DataFrame:
    """Runs of silent bugs (with their controls) and of healthy variants: loud bugs, unproven
    scenarios and bugs visible at setup are scored apart."""
    return table[apart_kind(table) == ""]


def pairs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (detector, buggy run) with its control's outcome: ``hit`` and
    ``control_alarm`` (each 0 or 1, nothing before the onset, nor on the control after the last
    step the buggy run reached), ``judged`` (quiet before the onset on both) and ``value`` (hit
    minus control alarm). A buggy run without a control is left out, and counted in
    ``unpaired``."""
    keys = ["detector", "scenario", "seed"]
    buggy = table[table["run_role"] == "buggy"]
    control = table[table["run_role"] == "control"][[*keys, "outcome", "alarm_step"]].rename(
        columns={"outcome": "control_outcome", "alarm_step": "control_alarm_step"})
    paired = buggy.merge(control, on=keys, how="inner")
    judged = (paired["outcome"] != "early") & (paired["control_outcome"] != "early")
    hit = (paired["outcome"] == "hit") & judged
    # tables stored before runs recorded their length compare the whole control
    reached = pd.to_numeric(paired["steps"] if "steps" in paired else
                            pd.Series(np.nan, paired.index), errors="coerce")
    within = reached.isna() | (paired["control_alarm_step"] < reached)
    alarm = (paired["control_outcome"] == "false_alarm") & within & judged
    return paired.assign(judged=judged, hit=hit.astype(int), control_alarm=alarm.astype(int),
                         value=hit.astype(int) - alarm.astype(int))


def paired_scores(p: pd.DataFrame) -> dict:
    """The macro-averaged paired score, recall and matched false-alarm rate of one detector's
    pairs, each with its interval over bugs, and the run-level counts beside them."""
    per_bug = p.groupby("bug").agg(value=("value", "mean"), judged=("judged", "sum"))
    judged = p[p["judged"]]
    rates = judged.groupby("bug").agg(recall=("hit", "mean"), fa=("control_alarm", "mean"))
    hits = int(judged["hit"].sum())
    return {
        "bugs": len(per_bug), "pairs": len(p), "hits": hits, "misses": len(judged) - hits,
        "early": int((p["outcome"] == "early").sum()),
        "control_alarms": int(judged["control_alarm"].sum()),
        **_columns("score", cluster_interval(per_bug["value"].to_numpy())),
        **_columns("recall", cluster_interval(rates["recall"].to_numpy(), rate=True)),
        **_columns("matched_false_alarm_rate", cluster_interval(rates["fa"].to_numpy(),
                                                                rate=True)),
        "recall_runs": hits / len(judged) if len(judged) else math.nan,
    }


def healthy_rate(clean: pd.DataFrame) -> dict:
    """The share of healthy variants' runs with an alarm, averaged over scenarios, with its
    interval over scenarios."""
    per_scenario = (clean["outcome"] == "false_alarm").groupby(clean["scenario"]).mean()
    value = cluster_interval(per_scenario.to_numpy(), rate=True)
    return {"clean_runs": len(clean), "false_alarms": int((clean["outcome"] == "false_alarm").sum()),
            **_columns("healthy_false_alarm_rate", value),
            "flag": (f"healthy false alarms > {HEALTHY_LIMIT:g}"
                     if value[0] > HEALTHY_LIMIT else "")}


def diagnosis(hits: pd.DataFrame) -> dict:
    """The share of hits whose first alarm named the bug's category, per bug, then over bugs,
    with its interval over bugs."""
    per_bug = hits.groupby("bug")["diagnosed"].apply(lambda d: d.fillna(False).mean())
    return _columns("diagnosis_accuracy", cluster_interval(per_bug.to_numpy(), rate=True))


def _delays(hits: pd.DataFrame, column: str) -> tuple[float, float, float]:
    return pooled_interval([g[column].to_numpy(dtype=float) for _, g in hits.groupby("bug")])


def detector_row(g: pd.DataFrame) -> dict:
    """Every figure of one detector over silent pairs and healthy runs."""
    p = pairs(g)
    hits = p[p["hit"] == 1]
    alarmed = p["hit"].sum() + p["control_alarm"].sum()
    clean = g[g["run_role"] == "clean"]
    return {
        **paired_scores(p), **healthy_rate(clean),
        "unpaired": int((g["run_role"] == "buggy").sum()) - len(p),
        "detector_errors": int(g["detector_error"].notna().sum()),
        **diagnosis(hits),
        **_columns("median_delay_steps", _delays(hits[hits["onset"] == 0], "delay_steps")),
        **_columns("median_delay_steps_midrun", _delays(hits[hits["onset"] > 0], "delay_steps")),
        # among the alarms inside the pairs' windows, the share on buggy runs (this mix only)
        "precision": p["hit"].sum() / alarmed if alarmed else math.nan,
    }


def _identity_columns(g: pd.DataFrame) -> dict:
    first = g.iloc[0]
    how = {"scored": first["scored"]} if "scored" in g and isinstance(first["scored"], str) else {}
    return {"role": first["role"], "scope": first["scope"],
            "source": f"{first['distribution']} {first['version']}".strip(), **how}


def run_overhead(table: pd.DataFrame, overhead: pd.DataFrame | None) -> dict[str, float]:
    """Each detector's (and suite's) overhead as a user pays it (``overhead.csv``'s
    ``paid_x``: a whole run's time with it over the bare loop's), averaged over models weighted
    by how many of its runs each model had."""
    if overhead is None or overhead.empty:
        return {}
    column = "paid_x" if "paid_x" in overhead else "median_x"
    ratio = overhead.set_index(["variant", "model"])[column]
    found = {}
    for name, g in table.groupby("detector"):
        runs = g.groupby(["model"]).size()
        known = [(m, n) for m, n in runs.items() if (name, m) in ratio.index]
        if known:
            found[name] = sum(ratio[name, m] * n for m, n in known) / sum(n for _, n in known)
    return found


def without_honeypots(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of real runs, and those of decoy pairs (:mod:`bugzoo.harness.honeypot`)."""
    decoy = (table["honeypot"].fillna(False).astype(bool) if "honeypot" in table
             else pd.Series(False, index=table.index))
    return table[~decoy], table[decoy]


def honeypot_row(g: pd.DataFrame) -> dict:
    """A detector's paired score on decoy pairs; its interval above 0 flags it: only reading
    which bug is planted or which run is armed, not what the run does, can score there."""
    p = pairs(g)
    scores = paired_scores(p) if len(p) else {"score": math.nan, "score_lo": math.nan,
                                               "score_hi": math.nan}
    return {"honeypot_score": scores["score"], "honeypot_score_lo": scores["score_lo"],
            "honeypot_score_hi": scores["score_hi"], "honeypot_pairs": len(p)}


def leaderboard(table: pd.DataFrame, overhead: pd.DataFrame | None = None,
                suite_label: str = "", decoys: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per detector and suite over silent pairs and healthy runs, best score first
    (``suite_label``: see :func:`~bugzoo.judge.outcomes.with_suites`), with the honeypot
    column from ``decoys``' rows when given."""
    scored = silent(with_suites(table, suite_label))
    paid = run_overhead(scored, overhead)
    rows = [{"detector": d, **_identity_columns(g), **detector_row(g),
             "overhead": paid.get(d, math.nan)} for d, g in scored.groupby("detector")]
    board = pd.DataFrame(rows)
    if board.empty:
        return board
    if decoys is not None and len(decoys):
        per = {d: honeypot_row(g) for d, g in with_suites(decoys, suite_label).groupby("detector")}
        board = board.assign(**{column: [per.get(d, {}).get(column, math.nan)
                                         for d in board["detector"]]
                                for column in honeypot_row(decoys.iloc[:0])})
        above = board["honeypot_score_lo"] > 0
        board["flag"] = [("; ".join(filter(None, (flag, HONEYPOT_FLAG))) if hit else flag)
                         for flag, hit in zip(board["flag"], above, strict=True)]
    return board.sort_values(["score", "recall", "detector"], ascending=[False, False, True],
                             na_position="last", ignore_index=True)


APART_COLUMNS = ["detector", "runs", "bugs", "pairs", "early", "score", "score_lo", "score_hi",
                 "recall", "recall_lo", "recall_hi", "median_delay_steps", "median_delay_steps_lo",
                 "median_delay_steps_hi"]
CATEGORY_COLUMNS = ["detector", "category", "bugs", "pairs", "early", "score", "score_lo",
                    "score_hi", "recall", "recall_lo", "recall_hi", "diagnosis_accuracy",
                    "diagnosis_accuracy_lo", "diagnosis_accuracy_hi"]


def apart_board(table: pd.DataFrame, kind: str, suite_label: str = "") -> pd.DataFrame:
    """One row per detector over the pairs of ``kind`` bugs: ``loud`` (crashes and hangs: did it
    see them coming), ``unproven`` (no symptom proven here: how often it flagged them) or
    ``visible`` (visible at setup: what a check of the setup is worth, beside a reader of
    the defaults that detects nothing)."""
    runs = with_suites(table, suite_label)
    runs = runs[(apart_kind(runs) == kind) & (runs["run_role"] != "clean")]
    rows = []
    for d, g in runs.groupby("detector"):
        p = pairs(g)
        hits = p[p["hit"] == 1]
        rows.append({"detector": d, "runs": int((g["run_role"] == "buggy").sum()),
                     **{k: v for k, v in paired_scores(p).items()
                        if k.startswith(("score", "recall", "early", "pairs", "bugs"))},
                     **_columns("median_delay_steps", _delays(hits, "delay_steps"))})
    return pd.DataFrame(rows, columns=APART_COLUMNS)


def unproven_effects(table: pd.DataFrame) -> pd.DataFrame:
    """Per unproven scenario, its bug's declared symptom on the buggy runs against their twins:
    the median of the paired differences (buggy minus control) with its bootstrap interval."""
    runs = table[table["unproven"]].drop_duplicates(["scenario", "seed", "run_role"])
    values = runs.pivot_table(index=["scenario", "seed"], columns="run_role",
                              values="symptom_value", aggfunc="first")
    rows = []
    for scenario, g in values.groupby(level="scenario"):
        if not {"buggy", "control"} <= set(g.columns):
            continue
        diff = (g["buggy"].astype(float) - g["control"].astype(float)).dropna().to_numpy()
        median, lo, hi = cluster_interval(diff, stat=np.median)
        rows.append({"scenario": scenario, "seeds": len(diff), "effect": median,
                     "effect_lo": lo, "effect_hi": hi})
    return pd.DataFrame(rows, columns=["scenario", "seeds", "effect", "effect_lo", "effect_hi"])


def category_board(table: pd.DataFrame, suite_label: str = "") -> pd.DataFrame:
    """One row per (detector or suite, bug category) over silent pairs: the paired score,
    recall, early alarms and diagnosis, macro-averaged over the category's bugs."""
    scored = silent(with_suites(table, suite_label))
    rows = []
    for d, g in scored.groupby("detector"):
        p = pairs(g)
        for c, pc in p.groupby("category"):
            scores = paired_scores(pc)
            rows.append({"detector": d, "category": c, "bugs": scores["bugs"],
                         "pairs": scores["pairs"], "early": scores["early"],
                         **{k: scores[k] for k in ("score", "score_lo", "score_hi", "recall",
                                                   "recall_lo", "recall_hi")},
                         **diagnosis(pc[pc["hit"] == 1])})
    return pd.DataFrame(rows, columns=CATEGORY_COLUMNS)


def bug_board(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (bug, detector) over buggy runs: hits, runs and the median delay in steps
    (what the catalogue's bug pages show)."""
    buggy = table[table["run_role"] == "buggy"]
    columns = ["bug", "detector", "hits", "runs", "median_delay_steps"]
    if buggy.empty:
        return pd.DataFrame(columns=columns)
    return (buggy.assign(hit=buggy["outcome"] == "hit")
            .groupby(["bug", "detector"]).agg(hits=("hit", "sum"), runs=("hit", "size"),
                                              median_delay_steps=("delay_steps", "median"))
            .reset_index()[columns])


# ----------------------------------------------------------------------------- writing
def _fmt(value, lo=None, hi=None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:.{digits}f}"
    if lo is not None and not (isinstance(lo, float) and math.isnan(lo)):
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def markdown_table(board: pd.DataFrame, keys: list[str]) -> str:
    """A Markdown table of ``board``; rate/median columns show their 95% interval when present."""
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for _, row in board.iterrows():
        cells = []
        for k in keys:
            v = row[k]
            if isinstance(v, float):
                cells.append(_fmt(v, row.get(f"{k}_lo"), row.get(f"{k}_hi")))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


MAIN_KEYS = ["detector", "role", "score", "recall", "matched_false_alarm_rate",
             "healthy_false_alarm_rate", "flag", "early", "diagnosis_accuracy",
             "median_delay_steps", "median_delay_steps_midrun", "overhead"]


def main_keys(board: pd.DataFrame) -> list[str]:
    """The main table's columns: where each row was scored and its honeypot score, on boards
    that have them."""
    keys = list(MAIN_KEYS)
    if "scored" in board:
        keys.insert(keys.index("role") + 1, "scored")
    if "honeypot_score" in board:
        keys.insert(keys.index("flag"), "honeypot_score")
    return keys


COUNT_KEYS = ["detector", "bugs", "pairs", "hits", "misses", "early", "control_alarms",
              "clean_runs", "false_alarms", "recall_runs", "unpaired", "detector_errors"]
CATEGORY_KEYS = ["detector", "category", "bugs", "pairs", "score", "recall", "early",
                 "diagnosis_accuracy"]
APART_KEYS = ["detector", "runs", "bugs", "score", "recall", "early", "median_delay_steps"]
EFFECT_KEYS = ["scenario", "seeds", "effect"]

def render(board: pd.DataFrame, loud: pd.DataFrame, unproven: pd.DataFrame,
           visible: pd.DataFrame, effects: pd.DataFrame, categories: pd.DataFrame,
           command: str, stamp: str, title: str = "Detector leaderboard") -> str:
    """``leaderboard.md`` (``templates/leaderboard.md.j2``) from the board and its tables."""
    mix = (f"{int(board['bugs'].max())} silent bugs in {int(board['pairs'].max())} pairs of "
           f"buggy and control runs, and {int(board['clean_runs'].max())} runs of healthy "
           "variants" if len(board) else "no runs")

    def table(frame: pd.DataFrame, keys: list[str], empty: str = "") -> str:
        return markdown_table(frame, keys) if len(frame) else empty

    return render_page(
        "leaderboard", title=title, command=command, stamp=stamp, mix=mix,
        healthy_limit=f"{HEALTHY_LIMIT:g}", honeypot_flag=HONEYPOT_FLAG,
        honeypots="honeypot_score" in board,
        main=table(board, main_keys(board), "_no silent-bug runs_"),
        counts=table(board, COUNT_KEYS),
        sources=table(board[["detector", "role", "scope", "source"]].sort_values("detector")
                      if len(board) else board, ["detector", "role", "scope", "source"]),
        loud=table(loud, APART_KEYS, "_no loud-bug runs_"),
        effects=table(effects, EFFECT_KEYS, "_no unproven scenarios_"),
        unproven=table(unproven, APART_KEYS),
        visible=table(visible, APART_KEYS, "_no setup-visible bugs_"),
        categories=table(categories, CATEGORY_KEYS, "_no buggy runs_"))


PUBLISHED = Path("results/leaderboard.csv")  # the reference board, as committed


def beside_published(board: pd.DataFrame, published: Path = PUBLISHED) -> list[str]:
    """One line per detector on ``board`` (suites and baselines aside): its rank and score here,
    its published score, the published suite's and the best published single built-in's, each
    marked "this run" or "published", so that a figure of one board is never read as the
    other's. Empty when nothing is published."""
    if not published.is_file() or board.empty:
        return []
    ref = pd.read_csv(published).set_index("detector")
    own = ref[(ref["role"] == "heuristic") & ref["source"].str.startswith(OWN_DISTRIBUTION)]
    best = own["score"].idxmax() if len(own) else None
    suite = "suite: built-ins"
    lines = []
    for rank, row in enumerate(board.itertuples(), 1):
        if row.role in ("suite", "baseline"):
            continue
        text = (f"- `{row.detector}`: rank {rank} of {len(board)} here, score "
                f"{_fmt(row.score, row.score_lo, row.score_hi)} (this run)")
        if row.detector in ref.index:
            r = ref.loc[row.detector]
            text += f"; {_fmt(r['score'], r['score_lo'], r['score_hi'])} (published)"
        if suite in ref.index:
            r = ref.loc[suite]
            text += f"; `{suite}` {_fmt(r['score'], r['score_lo'], r['score_hi'])} (published)"
        if best is not None:
            text += f"; best single built-in `{best}` {_fmt(ref.loc[best, 'score'])} (published)"
        lines.append(text)
    return lines


def read_overhead(sweep_dir: Path) -> pd.DataFrame | None:
    path = Path(sweep_dir) / OVERHEAD_FILE
    return pd.read_csv(path) if path.is_file() else None


def score_sweep(sweep_dir: Path, publish: Path | None = None,
                command: str | None = None, beside: Path | None = None) -> str:
    """Score a sweep folder; write leaderboard.md/.csv and the other tables; return the md.
    ``beside``: another sweep folder whose detectors are scored too, on the runs both made
    (see :func:`with_rows_beside`)."""
    sweep_dir = Path(sweep_dir)
    table = outcomes(sweep_dir)
    overhead = read_overhead(sweep_dir)
    if beside is not None:
        table = with_rows_beside(table, outcomes(Path(beside)))
        one_code(table, f"{sweep_dir} and {beside}")
        frames = [f for f in (overhead, read_overhead(Path(beside))) if f is not None]
        overhead = (pd.concat(frames).drop_duplicates(["variant", "model"])
                    if frames else None)
    text = write_boards(table, overhead, sweep_dir, command or f"bugzoo score {sweep_dir}",
                        [sweep_dir, *([Path(publish)] if publish else [])],
                        compare=publish is None)
    table.to_csv(sweep_dir / "outcomes.csv", index=False)
    if publish is not None:  # what made the board, beside it: its inputs and its split
        table.to_parquet(Path(publish) / PUBLISHED_OUTCOMES, index=False)
        # deferred: the out-of-sample page is made of this module's boards
        from bugzoo.judge.out_of_sample import has_unseen_bugs, write_out_of_sample
        real, _ = without_honeypots(table)
        if has_unseen_bugs(real):
            stamp = store.sweep_stamp(sweep_dir) or "Runs made with unrecorded versions"
            made_by = store.read_sweep_command(sweep_dir)
            write_out_of_sample(real, Path(publish),
                                f"{made_by}` then `{command}" if made_by else command, stamp)
        for name in (OVERHEAD_FILE, store.SWEEP_TIME, store.SPLIT_FILE):
            if (sweep_dir / name).is_file():
                shutil.copy(sweep_dir / name, Path(publish) / name)
    return text


def with_rows_beside(table: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus ``other``'s rows for the detectors ``table`` lacks, on the runs
    (scenario, seed and role) ``table`` has: a tool swept on a subset, scored beside the
    reference sweep's detectors on the same runs."""
    runs = table[["scenario", "seed", "run_role"]].drop_duplicates()
    theirs = other[~other["detector"].isin(set(table["detector"]))]
    return pd.concat([table, theirs.merge(runs, on=["scenario", "seed", "run_role"])],
                     ignore_index=True)


def board_inputs(table: pd.DataFrame, suite_label: str = ""
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """What the boards of an outcome ``table`` score: its real runs with the setup reader's
    rows, those runs with the suites' rows (made once: each board reads them), and the decoy
    pairs apart, for the honeypot column."""
    table, decoys = without_honeypots(table)
    if SETUP_READER not in set(table["detector"]):
        table = pd.concat([table, setup_reader_rows(table)], ignore_index=True)
    return table, with_suites(table, suite_label), decoys


def write_boards(table: pd.DataFrame, overhead: pd.DataFrame | None, made_in: Path,
                 command: str, folders: list[Path], suite_label: str = "",
                 compare: bool = True) -> str:
    """Score the outcome ``table`` of runs made in the folder ``made_in`` (whose recorded
    commands, versions and split the leaderboard names before ``command``); write
    leaderboard.md, .csv and the other tables into each of ``folders``; return the Markdown.
    ``suite_label`` names suites that are not whole (a replay's). ``compare``: add each
    detector's line beside the published board (off when this board is the published one)."""
    table, runs, decoys = board_inputs(table, suite_label)
    board = leaderboard(runs, overhead, suite_label, decoys)
    loud, unproven, visible = (apart_board(runs, kind, suite_label) for kind in APART_KINDS)
    effects = unproven_effects(table)
    categories = category_board(runs, suite_label)
    if made_by := store.read_sweep_command(made_in):
        command = f"{made_by}` then `{command}"
    stamp = store.sweep_stamp(made_in) or "Runs made with unrecorded versions"
    named = (store.read_split(made_in) or {}).get("board")  # e.g. Lite
    if named:
        stamp = f"bugzoo-bench {named}: {stamp}"
    text = render(board, loud, unproven, visible, effects, categories, command,
                  f"{stamp} (scored with {versions()})",
                  f"Detector leaderboard: bugzoo-bench {named}" if named else
                  "Detector leaderboard")
    if compare and (lines := beside_published(board)):
        text += "\n".join(["## Beside the published reference", "",
                           f"The published board is `{PUBLISHED}`, a test-split sweep; a board "
                           "made here on other runs (a replay of the dev traces, a subset, "
                           "fewer seeds) is not the same figure.", "", *lines, ""])
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "leaderboard.md").write_text(text)
        board.to_csv(folder / "leaderboard.csv", index=False)
        loud.to_csv(folder / "leaderboard_loud.csv", index=False)
        unproven.to_csv(folder / "leaderboard_unproven.csv", index=False)
        visible.to_csv(folder / "leaderboard_visible.csv", index=False)
        effects.to_csv(folder / "unproven_effects.csv", index=False)
        categories.to_csv(folder / "leaderboard_categories.csv", index=False)
        bug_board(table).to_csv(folder / "leaderboard_bugs.csv", index=False)
        if len(board):
            leaderboard_figure(board, folder / "leaderboard.png",
                               f"Detector leaderboard ({int(board['bugs'].max())} silent bugs)")
        if len(categories):
            category_figure(categories, folder / "recall_by_category.png",
                            "Recall by bug category", set(board.loc[board["role"] == "baseline",
                                                                    "detector"]))
    return text


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo score",
                       description="Recompute the leaderboard of a stored sweep.")
    p.add_argument("sweep_dir", help="a sweep folder, e.g. results/runs/bench")
    p.add_argument("--publish", nargs="?", const=PUBLISH_HERE, metavar="DIR",
                   help="also write the tables into DIR (default: results/, a Lite sweep's "
                   "results/lite/)")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="sealed detectors (names or selectors) to score again on the sweep's "
                   "stored traces before the board is made; trains nothing")
    p.add_argument("--beside", metavar="SWEEP_DIR",
                   help="also score this sweep's detectors, on the runs both sweeps made "
                        "(e.g. a tool's subset beside results/runs/bench)")
    args = p.parse_args(argv)
    for folder in filter(None, (args.sweep_dir, args.beside)):
        if not Path(folder).is_dir():
            raise UsageError(f"no sweep folder {folder}")
    if args.detectors:
        score_sweep_sealed(Path(args.sweep_dir), sealed_selection(args.detectors))
    publishing = [] if args.publish is None else ["--publish"] if args.publish == PUBLISH_HERE \
        else ["--publish", args.publish]
    command = command_line("score", [args.sweep_dir, *publishing,
                                     *(["--beside", args.beside] if args.beside else [])])
    lite = (store.read_split(Path(args.sweep_dir)) or {}).get("board") == "Lite"
    publish = None if args.publish is None else Path(args.publish) if args.publish != \
        PUBLISH_HERE else Path("results") / ("lite" if lite else "")
    if publish is not None:
        if publish.exists() and not publish.is_dir():
            raise UsageError(f"--publish {publish} is a file, not a folder")
        publish.mkdir(parents=True, exist_ok=True)
    print(score_sweep(Path(args.sweep_dir), publish, command,
                      Path(args.beside) if args.beside else None))
    return 0
