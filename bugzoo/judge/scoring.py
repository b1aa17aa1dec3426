"""Score a sweep: per (detector, run) outcomes, then per-detector and per-category tables.

Outcomes of one detector on one run (its *first* alarm decides):

* buggy run: ``hit`` (first alarm at or after onset), ``early`` (before onset: a false alarm),
  ``miss`` (no alarm);
* clean run (no bug planted: a control or a healthy variant): ``false_alarm`` or ``quiet``.

Aggregates carry 95% confidence intervals: Wilson intervals for rates, percentile bootstrap
for medians and means. Loud bugs (crash, hang) are scored apart from silent ones.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from bugzoo.detector import REAL_TOOLS
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store

log = logging.getLogger(__name__)

Z95 = 1.959963984540054
BOOTSTRAP = 2000


def wilson(successes: int, n: int) -> tuple[float, float, float]:
    """Proportion with its 95% Wilson score interval; NaNs when ``n`` is 0."""
    if n == 0:
        return math.nan, math.nan, math.nan
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n**2)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)


def bootstrap(values, stat=np.median, seed: int = 0) -> tuple[float, float, float]:
    """Statistic with its 95% percentile-bootstrap interval; NaNs when there are no values."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats = stat(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(stat(x)), float(lo), float(hi)


def _onset_time(elapsed: pd.Series, onset: int) -> float:
    """Seconds into the run when step ``onset`` began."""
    return float(elapsed.get(onset - 1, 0.0)) if onset > 0 else 0.0


def run_outcomes(path: Path) -> list[dict]:
    """One row per detector that watched the run stored at ``path``."""
    summary = store.read_summary(path)
    alarms = store.read_alarms(path)
    scenario = summary["scenario"]
    clean = not summary.get("bug")
    onset = int(summary.get("onset") or 0)
    elapsed = pd.Series(dtype=float)
    if not alarms.empty:
        trace = store.read_trace(path)
        if "elapsed_s" in trace.columns:
            elapsed = trace.set_index("step")["elapsed_s"]
    rows = []
    for name, status in (summary.get("detectors") or {}).items():
        mine = alarms[alarms["detector"] == name].sort_values("step", kind="stable")
        first = mine.iloc[0] if len(mine) else None
        step = int(first["step"]) if first is not None else None
        if clean:
            outcome = "quiet" if first is None else "false_alarm"
        elif first is None:
            outcome = "miss"
        else:
            outcome = "hit" if step >= onset else "early"
        hit = outcome == "hit"
        rows.append({
            "detector": name, "scenario": scenario, "seed": summary["seed"],
            "bug": summary.get("bug"), "category": summary.get("category"),
            "loud": bool(summary.get("loud")), "clean": clean, "onset": onset,
            "run_outcome": summary.get("outcome"), "outcome": outcome,
            "alarm_step": step, "alarm_category": first["category"] if first is not None else None,
            "delay_steps": step - onset if hit else None,
            "delay_s": (float(elapsed.get(step, math.nan)) - _onset_time(elapsed, onset))
            if hit and len(elapsed) else None,
            "diagnosed": (first["category"] == summary.get("category")) if hit else None,
            "overhead": status.get("overhead"), "detector_error": status.get("error"),
        })
    return rows


def outcomes(sweep_dir: Path) -> pd.DataFrame:
    """Per (detector, run) outcomes of every complete run in a sweep folder."""
    rows = [row for path in store.iter_runs(sweep_dir) for row in run_outcomes(path)]
    if not rows:
        raise UsageError(f"no complete runs under {sweep_dir}")
    return pd.DataFrame(rows)


def _rate(name: str, k: int, n: int) -> dict:
    p, lo, hi = wilson(k, n)
    return {name: p, f"{name}_lo": lo, f"{name}_hi": hi}


def _summarize(g: pd.DataFrame) -> dict:
    """Aggregate one detector's (or one detector x category's) outcomes."""
    counts = g["outcome"].value_counts()
    hits, early, fa = (int(counts.get(k, 0)) for k in ("hit", "early", "false_alarm"))
    buggy, clean = int((~g["clean"]).sum()), int(g["clean"].sum())
    recall = hits / buggy if buggy else math.nan
    precision = hits / (hits + early + fa) if hits + early + fa else math.nan
    delays = g["delay_steps"].dropna().astype(float)
    row = {"runs": len(g), "buggy_runs": buggy, "clean_runs": clean, "hits": hits,
           "early": early, "false_alarms": fa,
           "detector_errors": int(g["detector_error"].notna().sum()),
           **_rate("recall", hits, buggy), **_rate("false_alarm_rate", fa, clean),
           **_rate("precision", hits, hits + early + fa),
           "f1": 2 * precision * recall / (precision + recall)
           if precision + recall > 0 else math.nan,
           **_rate("diagnosis_accuracy", int(g["diagnosed"].fillna(False).astype(bool).sum()),
                   hits)}
    for key, values in (("median_delay_steps", delays),
                        ("median_delay_s", g["delay_s"].dropna().astype(float))):
        value, lo, hi = bootstrap(values)
        row.update({key: value, f"{key}_lo": lo, f"{key}_hi": hi})
    value, lo, hi = bootstrap(g["overhead"].dropna().astype(float), stat=np.mean)
    row.update(overhead=value, overhead_lo=lo, overhead_hi=hi)
    return row


def suite_outcomes(table: pd.DataFrame, name: str, member: Callable[[str], bool]
                   ) -> pd.DataFrame:
    """A suite as one detector: per run, the first alarm of any member counts (its step, its
    category); a clean run is a false alarm when any member alarmed; overheads add up."""
    rows = []
    for _, g in table[table["detector"].map(member)].groupby(["scenario", "seed"]):
        first = g.dropna(subset=["alarm_step"]).sort_values(["alarm_step", "delay_s"])
        row = (first.iloc[0] if len(first) else g.iloc[0]).to_dict()
        if g["clean"].iloc[0]:
            row["outcome"] = "false_alarm" if len(first) else "quiet"
        row.update(detector=name, overhead=g["overhead"].sum(),
                   detector_error=None if g["detector_error"].isna().all() else "member error")
        rows.append(row)
    return pd.DataFrame(rows)


def with_suites(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus the rows of the built-in suite (two or more built-ins watched) and of all
    detectors together (when real tools watched too)."""
    detectors = set(table["detector"])
    builtins = {d for d in detectors if d not in REAL_TOOLS}
    suites = []
    if len(builtins) > 1:
        suites.append(suite_outcomes(table, "suite: built-ins", builtins.__contains__))
    if builtins != detectors and len(detectors) > 1:
        suites.append(suite_outcomes(table, "suite: all", detectors.__contains__))
    return pd.concat([table, *suites], ignore_index=True)


def leaderboard(table: pd.DataFrame) -> pd.DataFrame:
    """One row per detector and suite: silent-bug runs and clean runs (loud bugs apart)."""
    silent = with_suites(table)
    silent = silent[~silent["loud"]]
    rows = [{"detector": d, **_summarize(g)} for d, g in silent.groupby("detector")]
    board = pd.DataFrame(rows)
    return board.sort_values(["f1", "recall"], ascending=False, na_position="last",
                             ignore_index=True) if len(board) else board


def loud_board(table: pd.DataFrame) -> pd.DataFrame:
    """One row per detector over loud-bug runs only (crashes and hangs)."""
    loud = table[table["loud"]]
    return pd.DataFrame([{"detector": d, **_summarize(g)} for d, g in loud.groupby("detector")])


def category_board(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (detector or suite, bug category) over buggy runs."""
    table = with_suites(table)
    buggy = table[~table["clean"]]
    return pd.DataFrame([{"detector": d, "category": c, "loud": bool(loud), **_summarize(g)}
                         for (d, c, loud), g in buggy.groupby(["detector", "category", "loud"])])


def bug_board(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (bug, detector) over buggy runs: hits, runs and the median delay in steps
    (what the catalogue's bug pages show)."""
    buggy = table[~table["clean"]]
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
    """A Markdown table of ``board``; rate/median columns show their 95% CI when present."""
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for _, row in board.iterrows():
        cells = []
        for k in keys:
            v = row[k]
            if isinstance(v, float):
                cells.append(_fmt(v, row.get(f"{k}_lo"), row.get(f"{k}_hi"),
                                  digits=3 if k.startswith("overhead") else 2))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


MAIN_KEYS = ["detector", "runs", "recall", "false_alarm_rate", "precision", "f1",
             "diagnosis_accuracy", "median_delay_steps", "median_delay_s", "overhead"]
CATEGORY_KEYS = ["detector", "category", "loud", "runs", "recall", "early", "diagnosis_accuracy",
                 "median_delay_steps"]


def render(board: pd.DataFrame, loud: pd.DataFrame, categories: pd.DataFrame,
           command: str) -> str:
    parts = [
        "# Detector leaderboard", "",
        f"Regenerate with `{command}`. Silent bugs and clean controls; rates with 95% Wilson "
        "intervals, delays (steps after onset, seconds) and overhead (detector time / run "
        "wall time) with 95% bootstrap intervals. `suite: built-ins` counts a run as caught "
        "when any of our own detectors alarmed (its first alarm gives step and diagnosis); "
        "`suite: all` adds the real tools (" + ", ".join(REAL_TOOLS) + ").", "",
        markdown_table(board, MAIN_KEYS) if len(board) else "_no silent-bug runs_", "",
        "## Loud bugs (crash or hang)", "",
        markdown_table(loud, ["detector", "runs", "recall", "diagnosis_accuracy",
                              "median_delay_steps"]) if len(loud) else "_no loud-bug runs_", "",
        "## Per bug category", "",
        markdown_table(categories, CATEGORY_KEYS) if len(categories) else "_no buggy runs_", "",
    ]
    return "\n".join(parts)


def score_sweep(sweep_dir: Path, publish: Path | None = None,
                command: str | None = None) -> str:
    """Score a sweep folder; write leaderboard.md/.csv and per-category tables; return the md."""
    sweep_dir = Path(sweep_dir)
    table = outcomes(sweep_dir)
    board, loud, categories = leaderboard(table), loud_board(table), category_board(table)
    command = command or f"bugzoo score {sweep_dir}"
    if made_by := store.read_sweep_command(sweep_dir):
        command = f"{made_by}` then `{command}"
    text = render(board, loud, categories, command)
    for folder in [sweep_dir, *([Path(publish)] if publish else [])]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "leaderboard.md").write_text(text)
        board.to_csv(folder / "leaderboard.csv", index=False)
        loud.to_csv(folder / "leaderboard_loud.csv", index=False)
        categories.to_csv(folder / "leaderboard_categories.csv", index=False)
        bug_board(table).to_csv(folder / "leaderboard_bugs.csv", index=False)
    table.to_csv(sweep_dir / "outcomes.csv", index=False)
    return text


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo score",
                                description="Recompute the leaderboard of a stored sweep.")
    p.add_argument("sweep_dir", help="a sweep folder, e.g. results/runs/bench")
    p.add_argument("--publish", action="store_true",
                   help="also write the tables into results/")
    args = p.parse_args(argv)
    if not Path(args.sweep_dir).is_dir():
        raise UsageError(f"no sweep folder {args.sweep_dir}")
    command = f"bugzoo score {args.sweep_dir}" + (" --publish" if args.publish else "")
    print(score_sweep(Path(args.sweep_dir), Path("results") if args.publish else None, command))
    return 0
