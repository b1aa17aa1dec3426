"""Score a sweep: per (detector, run) outcomes, then leaderboards that reward discrimination.

The outcome of one detector on one run is decided by its *first* alarm:

* clean run (a control or a healthy variant): ``false_alarm`` or ``quiet``;
* buggy run whose bug starts at step ``onset``: ``early`` (first alarm before the onset, when
  the run was still identical to its clean control: a false alarm on that run), ``hit`` (at or
  after the onset) or ``miss`` (no alarm).

The primary score is Youden's J, **recall minus the matched false-alarm rate**:

* recall = hits / (hits + misses): the share of buggy runs caught, among those where the
  detector was still quiet when the bug began (an early run is a false alarm, not a chance to
  catch the bug);
* the matched false-alarm rate holds each judged buggy run against the clean runs over the same
  stretch: for a run with onset k, the share of clean runs, quiet before step k, that alarm at
  step k or later. For onset 0 that is the plain false-alarm rate on clean runs.

A detector that knows nothing about the bug alarms as often on clean runs as on buggy ones over
any stretch, so its J is 0 whatever it does: alarm at step 0 of every run, at step 150, never,
or at random. Sorting by J ranks detectors by how well they tell buggy runs from clean ones.

Rates carry exact (Clopper-Pearson) 95% intervals; J, medians and means carry 95% percentile
bootstrap intervals (buggy and clean runs resampled apart). Loud bugs (crash, hang) and latent
ones (no outcome symptom in their setting) are scored apart from silent ones.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from bugzoo import versions
from bugzoo.detector_registry import DETECTORS, role_of
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.judge.stats import BOOTSTRAP, bootstrap, clopper_pearson
from bugzoo.registry import OWN_DISTRIBUTION

log = logging.getLogger(__name__)

# Suites count a run as caught by the first alarm of any member: bugzoo's own detectors of
# these roles (baselines and outside plug-ins are never members).
SUITES = {"suite: built-ins": ("heuristic",), "suite: built-ins + tools": ("heuristic", "tool")}
OVERHEAD_FILE = "overhead.csv"


# ----------------------------------------------------------------------------- outcomes
def _onset_time(elapsed: pd.Series, onset: int) -> float:
    """Seconds into the run when step ``onset`` began."""
    return float(elapsed.get(onset - 1, 0.0)) if onset > 0 else 0.0


def _identity(name: str, status: dict) -> dict:
    """Role and source of a detector: as the run recorded them, else as installed now."""
    if "role" in status:
        return {"role": status["role"], "distribution": status["distribution"],
                "version": status["version"]}
    if name in DETECTORS:
        distribution, version = DETECTORS.provider(name)
        return {"role": role_of(name), "distribution": distribution, "version": version}
    return {"role": "heuristic", "distribution": "unknown", "version": ""}


def run_outcomes(path: Path) -> list[dict]:
    """One row per detector that watched the run stored at ``path``."""
    summary = store.read_summary(path)
    alarms = store.read_alarms(path)
    elapsed = pd.Series(dtype=float)
    if not alarms.empty:
        trace = store.read_trace(path)
        if "elapsed_s" in trace.columns:
            elapsed = trace.set_index("step")["elapsed_s"]
    return judge_run(summary, alarms, elapsed)


def judge_run(summary: dict, alarms: pd.DataFrame, elapsed: pd.Series) -> list[dict]:
    """One row per detector in ``summary["detectors"]``: its outcome on the run that
    ``summary`` describes, from its ``alarms`` (``store.ALARM_COLUMNS``); ``elapsed``: the
    run's seconds at the end of each step, by step (empty: no delays in seconds)."""
    clean = not summary.get("bug")
    onset = int(summary.get("onset") or 0)
    # the symptom's first step, where a practitioner can first see it: the first step whose
    # loss or gradients hold a non-finite value (None for runs that stay finite)
    symptom = summary.get("first_nonfinite_step")
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
            "detector": name, **_identity(name, status), "scenario": summary["scenario"],
            "model": summary.get("model"), "seed": summary["seed"], "bug": summary.get("bug"),
            "category": summary.get("category"), "loud": bool(summary.get("loud")),
            "latent": bool(summary.get("latent")), "clean": clean, "onset": onset,
            "run_outcome": summary.get("outcome"),
            "outcome": outcome, "alarm_step": step,
            "alarm_category": first["category"] if first is not None else None,
            "delay_steps": step - onset if hit else None,
            "delay_after_symptom_steps": step - symptom if hit and symptom is not None else None,
            "delay_s": (float(elapsed.get(step, math.nan)) - _onset_time(elapsed, onset))
            if hit and len(elapsed) else None,
            "diagnosed": (first["category"] == summary.get("category")) if hit else None,
            "detector_error": status.get("error"),
        })
    return rows


def outcomes(sweep_dir: Path) -> pd.DataFrame:
    """Per (detector, run) outcomes of every complete run in a sweep folder."""
    rows = [row for path in store.iter_runs(sweep_dir) for row in run_outcomes(path)]
    if not rows:
        raise UsageError(f"no complete runs under {sweep_dir}")
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- suites
def silent(table: pd.DataFrame) -> pd.DataFrame:
    """Clean runs and silent buggy runs: loud bugs (a crash, a hang) and latent ones (no
    outcome symptom in their setting) are scored apart."""
    return table[~table["loud"] & ~table["latent"]]


def false_alarm_rates(table: pd.DataFrame) -> dict[str, float]:
    """Each detector's share of clean runs with an alarm (ties between suite members)."""
    clean = table[table["clean"]]
    return (clean["outcome"] == "false_alarm").groupby(clean["detector"]).mean().to_dict()


def suite_outcomes(table: pd.DataFrame, name: str, members: set[str]) -> pd.DataFrame:
    """A suite as one detector: per run, the first alarm of any member counts. Its diagnosis
    is the category of the member that alarmed first; members alarming at the same step are
    ranked by their false-alarm rate on this sweep's clean runs (the one that cries wolf least
    is trusted most), then by name."""
    fa = false_alarm_rates(table)
    rows = []
    for _, g in table[table["detector"].isin(members)].groupby(["scenario", "seed"]):
        alarmed = g.dropna(subset=["alarm_step"]).assign(
            rank=lambda d: d["detector"].map(lambda n: fa.get(n, 0.0)))
        first = alarmed.sort_values(["alarm_step", "rank", "detector"])
        row = (first.iloc[0] if len(first) else g.iloc[0]).to_dict()
        row.pop("rank", None)
        if row["clean"]:
            row["outcome"] = "false_alarm" if len(first) else "quiet"
        row.update(detector=name, role="suite", distribution=OWN_DISTRIBUTION,
                   version=g["version"].iloc[0],
                   detector_error=None if g["detector_error"].isna().all() else "member error")
        rows.append(row)
    return pd.DataFrame(rows)


def form_suites(identities: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """The suites that detectors given as ``name -> (role, distribution)`` form: for each of
    ``SUITES``, bugzoo's own detectors of its roles, when there are two or more of them and they
    are not the members of a suite already formed."""
    suites: dict[str, list[str]] = {}
    for name, roles in SUITES.items():
        members = sorted(d for d, (role, dist) in identities.items()
                         if dist == OWN_DISTRIBUTION and role in roles)
        if len(members) > 1 and members not in suites.values():
            suites[name] = members
    return suites


def suite_members(detectors: list[str]) -> dict[str, list[str]]:
    """The suites that installed ``detectors`` form (see :func:`form_suites`)."""
    return form_suites({d: (role_of(d), DETECTORS.provider(d)[0]) for d in detectors})


def with_suites(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus a row per run for each suite its detectors form."""
    identities = table.groupby("detector")[["role", "distribution"]].first()
    suites = form_suites({d: (r.role, r.distribution) for d, r in identities.iterrows()})
    return pd.concat([table, *(suite_outcomes(table, name, set(members))
                               for name, members in suites.items())], ignore_index=True)


# ----------------------------------------------------------------------------- the score
def _clean_rates(first: np.ndarray, onsets: np.ndarray) -> np.ndarray:
    """For each onset k: the share of clean runs quiet before k that alarm at k or later.

    ``first`` holds each clean run's first alarm step (inf: none). A k before which every
    clean run alarmed gives 1 (no clean run left to compare with counts against the detector).
    """
    quiet = first[None, :] >= onsets[:, None]
    alarmed = quiet & np.isfinite(first)[None, :]
    counts = quiet.sum(1)
    return np.where(counts > 0, alarmed.sum(1) / np.maximum(counts, 1), 1.0)


def discrimination(g: pd.DataFrame, seed: int = 0) -> dict:
    """Recall, false-alarm rates and the score (Youden's J) of one detector's silent runs."""
    clean, buggy = g[g["clean"]], g[~g["clean"]]
    first = clean["alarm_step"].fillna(np.inf).to_numpy(dtype=float)
    judged = buggy[buggy["outcome"].isin(["hit", "miss"])]
    hits, misses = int((judged["outcome"] == "hit").sum()), int((judged["outcome"] == "miss").sum())
    false_alarms = int((clean["outcome"] == "false_alarm").sum())
    ks, where = np.unique(judged["onset"].to_numpy(dtype=float), return_inverse=True)
    weights = np.bincount(where, minlength=len(ks)) if len(judged) else np.zeros(0)
    matched = (float(weights @ _clean_rates(first, ks) / weights.sum())
               if len(judged) and len(clean) else math.nan)
    recall = clopper_pearson(hits, hits + misses)
    score = recall[0] - matched
    row = {"buggy_runs": len(buggy), "clean_runs": len(clean), "hits": hits, "misses": misses,
           "early": int((buggy["outcome"] == "early").sum()), "false_alarms": false_alarms,
           "score": score, **_interval("score", _score_bootstrap(buggy, first, seed)),
           "recall": recall[0], "recall_lo": recall[1], "recall_hi": recall[2]}
    fa = clopper_pearson(false_alarms, len(clean))
    row.update(false_alarm_rate=fa[0], false_alarm_rate_lo=fa[1], false_alarm_rate_hi=fa[2],
               matched_false_alarm_rate=matched)
    return row


def _interval(name: str, draws: np.ndarray) -> dict:
    draws = draws[np.isfinite(draws)]
    if len(draws) == 0:
        return {f"{name}_lo": math.nan, f"{name}_hi": math.nan}
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {f"{name}_lo": float(lo), f"{name}_hi": float(hi)}


def _score_bootstrap(buggy: pd.DataFrame, first: np.ndarray, seed: int) -> np.ndarray:
    """Bootstrap draws of J: buggy runs and clean runs resampled apart, with replacement."""
    if buggy.empty or len(first) == 0:
        return np.array([])
    rng = np.random.default_rng(seed)
    outcome = buggy["outcome"].to_numpy()
    judged, hit = np.isin(outcome, ["hit", "miss"]), outcome == "hit"
    ks, where = np.unique(buggy["onset"].to_numpy(dtype=float), return_inverse=True)
    at = np.eye(len(ks), dtype=bool)[where].T & judged  # [K, buggy]: judged run with onset k
    quiet = first[None, :] >= ks[:, None]  # [K, clean]
    alarmed = quiet & np.isfinite(first)[None, :]
    pick_b = rng.integers(0, len(outcome), size=(BOOTSTRAP, len(outcome)))
    pick_c = rng.integers(0, len(first), size=(BOOTSTRAP, len(first)))
    n_at = at[:, pick_b].sum(-1)  # [K, B]
    n_quiet, n_alarmed = quiet[:, pick_c].sum(-1), alarmed[:, pick_c].sum(-1)
    rates = np.where(n_quiet > 0, n_alarmed / np.maximum(n_quiet, 1), 1.0)
    n_judged = n_at.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = hit[pick_b].sum(-1) / n_judged
        matched = (n_at * rates).sum(0) / n_judged
    return recall - matched


# ----------------------------------------------------------------------------- boards
def _rate(name: str, k: int, n: int) -> dict:
    p, lo, hi = clopper_pearson(k, n)
    return {name: p, f"{name}_lo": lo, f"{name}_hi": hi}


def _median(name: str, values: pd.Series) -> dict:
    value, lo, hi = bootstrap(values.dropna().astype(float))
    return {name: value, f"{name}_lo": lo, f"{name}_hi": hi}


def _summarize(g: pd.DataFrame) -> dict:
    """Every figure of one detector's (or one detector x category's) silent runs."""
    row = discrimination(g)
    hits = g[g["outcome"] == "hit"]
    flagged = row["hits"] + row["early"] + row["false_alarms"]
    row.update(
        detector_errors=int(g["detector_error"].notna().sum()),
        **_rate("diagnosis_accuracy", int(hits["diagnosed"].fillna(False).astype(bool).sum()),
                len(hits)),
        **_median("median_delay_steps", hits.loc[hits["onset"] == 0, "delay_steps"]),
        **_median("median_delay_steps_midrun", hits.loc[hits["onset"] > 0, "delay_steps"]),
        **_median("median_delay_s_midrun", hits.loc[hits["onset"] > 0, "delay_s"]),
        precision=row["hits"] / flagged if flagged else math.nan)
    return row


def _identity_columns(g: pd.DataFrame) -> dict:
    first = g.iloc[0]
    return {"role": first["role"],
            "source": f"{first['distribution']} {first['version']}".strip()}


def run_overhead(table: pd.DataFrame, overhead: pd.DataFrame | None) -> dict[str, float]:
    """Each detector's (and suite's) step-time ratio to the same loop without it, averaged over
    models weighted by how many of its runs each model had; measured by ``bugzoo bench`` in
    interleaved blocks (``overhead.csv``), not inside the shared runs."""
    if overhead is None or overhead.empty:
        return {}
    ratio = overhead.set_index(["variant", "model"])["median_x"]
    found = {}
    for name, g in table.groupby("detector"):
        runs = g.groupby(["model"]).size()
        known = [(m, n) for m, n in runs.items() if (name, m) in ratio.index]
        if known:
            found[name] = sum(ratio[name, m] * n for m, n in known) / sum(n for _, n in known)
    return found


def leaderboard(table: pd.DataFrame, overhead: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per detector and suite over silent-bug and clean runs, best score first."""
    scored = silent(with_suites(table))
    paid = run_overhead(scored, overhead)
    rows = [{"detector": d, **_identity_columns(g), **_summarize(g),
             "overhead": paid.get(d, math.nan)} for d, g in scored.groupby("detector")]
    board = pd.DataFrame(rows)
    if board.empty:
        return board
    return board.sort_values(["score", "recall", "detector"], ascending=[False, False, True],
                             na_position="last", ignore_index=True)


def apart_board(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    """One row per detector over the runs of ``kind`` bugs, ``loud`` (crashes and hangs: how
    many it saw coming) or ``latent`` (no outcome symptom here: how many it flagged anyway)."""
    runs = table[table[kind] & ~table["clean"]]
    rows = []
    for d, g in runs.groupby("detector"):
        judged = g[g["outcome"].isin(["hit", "miss"])]
        hits = g[g["outcome"] == "hit"]
        rows.append({"detector": d, "runs": len(g), "early": int((g["outcome"] == "early").sum()),
                     **_rate("recall", len(hits), len(judged)),
                     **_median("median_delay_steps", hits["delay_steps"]),
                     **_median("median_delay_after_symptom_steps",
                               hits["delay_after_symptom_steps"])})
    return pd.DataFrame(rows)


def category_board(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (detector or suite, bug category) over silent buggy runs: recall, early
    alarms, diagnosis and delay (the score needs clean runs, which have no category)."""
    scored = silent(with_suites(table))
    buggy = scored[~scored["clean"]]
    rows = []
    for (d, c), g in buggy.groupby(["detector", "category"]):
        hits = g[g["outcome"] == "hit"]
        judged = g[g["outcome"].isin(["hit", "miss"])]
        rows.append({"detector": d, "category": c, "runs": len(g),
                     "early": int((g["outcome"] == "early").sum()),
                     **_rate("recall", len(hits), len(judged)),
                     **_rate("diagnosis_accuracy",
                             int(hits["diagnosed"].fillna(False).astype(bool).sum()), len(hits)),
                     **_median("median_delay_steps", hits["delay_steps"]),
                     **_median("median_delay_after_symptom_steps",
                               hits["delay_after_symptom_steps"])})
    return pd.DataFrame(rows)


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


MAIN_KEYS = ["detector", "role", "score", "recall", "false_alarm_rate",
             "matched_false_alarm_rate", "early", "diagnosis_accuracy", "median_delay_steps",
             "median_delay_steps_midrun", "overhead", "precision"]
CATEGORY_KEYS = ["detector", "category", "runs", "recall", "early", "diagnosis_accuracy",
                 "median_delay_steps"]
APART_KEYS = ["detector", "runs", "recall", "early", "median_delay_steps"]


def render(board: pd.DataFrame, loud: pd.DataFrame, latent: pd.DataFrame,
           categories: pd.DataFrame, command: str, versions: str) -> str:
    mix = (f"{int(board['buggy_runs'].max())} silent buggy runs and "
           f"{int(board['clean_runs'].max())} clean runs" if len(board) else "no runs")
    sources = (markdown_table(board[["detector", "role", "source"]].sort_values("detector"),
                              ["detector", "role", "source"]) if len(board) else "")
    parts = [
        "# Detector leaderboard", "",
        f"Regenerate with `{command}`. Runs made with {versions}. Silent bugs and clean runs "
        f"({mix}); loud and latent bugs apart.", "",
        "**score** = recall - matched false-alarm rate (Youden's J), best first. **recall**: "
        "hits / (hits + misses) over buggy runs where the detector was still quiet when the "
        "bug began. **false_alarm_rate**: clean runs with any alarm. "
        "**matched_false_alarm_rate**: each judged buggy run held against the clean runs over "
        "the same stretch (clean runs quiet before its onset that alarm from it on); it equals "
        "the false-alarm rate when every bug starts at step 0. A detector that knows nothing "
        "of the bug scores 0 (see the baselines). **early**: buggy runs alarmed before their "
        "onset (false alarms). Delays in steps after onset, for bugs present from step 0 and "
        "for bugs that start mid-run apart. **overhead**: step time with the detector / "
        "without it (telemetry on in both), measured in interleaved blocks on each model's "
        "defaults and averaged over the sweep's runs (`overhead.csv`). **precision**: "
        "hits / runs alarmed, at this sweep's mix of runs only. Rates: exact (Clopper-Pearson) "
        "95% intervals; score, medians: 95% percentile-bootstrap intervals. Suites alarm at "
        "the first alarm of any member; their diagnosis is that member's, ties going to the "
        "member with the lowest false-alarm rate.", "",
        markdown_table(board, MAIN_KEYS) if len(board) else "_no silent-bug runs_", "",
        "## Detectors", "", sources, "",
        "## Loud bugs (crash or hang)", "",
        markdown_table(loud, APART_KEYS) if len(loud) else "_no loud-bug runs_", "",
        "## Latent bugs (no outcome symptom in their setting)", "",
        markdown_table(latent, APART_KEYS) if len(latent) else "_no latent-bug runs_", "",
        "## Per bug category", "",
        markdown_table(categories, CATEGORY_KEYS) if len(categories) else "_no buggy runs_", "",
    ]
    return "\n".join(parts)


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
        frames = [f for f in (overhead, read_overhead(Path(beside))) if f is not None]
        overhead = (pd.concat(frames).drop_duplicates(["variant", "model"])
                    if frames else None)
    text = write_boards(table, overhead, sweep_dir, command or f"bugzoo score {sweep_dir}",
                        [sweep_dir, *([Path(publish)] if publish else [])])
    table.to_csv(sweep_dir / "outcomes.csv", index=False)
    return text


def with_rows_beside(table: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus ``other``'s rows for the detectors ``table`` lacks, on the runs (scenario
    and seed) ``table`` has: a tool swept on a subset, scored beside the reference sweep's
    detectors on the same runs (a run is a function of its scenario and seed)."""
    runs = table[["scenario", "seed"]].drop_duplicates()
    theirs = other[~other["detector"].isin(set(table["detector"]))]
    return pd.concat([table, theirs.merge(runs, on=["scenario", "seed"])], ignore_index=True)


def write_boards(table: pd.DataFrame, overhead: pd.DataFrame | None, made_in: Path,
                 command: str, folders: list[Path]) -> str:
    """Score the outcome ``table`` of runs made in the folder ``made_in`` (whose recorded
    commands and versions the leaderboard names before ``command``); write leaderboard.md,
    .csv and the other tables into each of ``folders``; return the Markdown."""
    board = leaderboard(table, overhead)
    loud, latent = apart_board(table, "loud"), apart_board(table, "latent")
    categories = category_board(table)
    if made_by := store.read_sweep_command(made_in):
        command = f"{made_by}` then `{command}"
    made_with = store.read_sweep_versions(made_in)
    text = render(board, loud, latent, categories, command,
                  f"{made_with or 'unrecorded versions'} (scored with {versions()})")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "leaderboard.md").write_text(text)
        board.to_csv(folder / "leaderboard.csv", index=False)
        loud.to_csv(folder / "leaderboard_loud.csv", index=False)
        latent.to_csv(folder / "leaderboard_latent.csv", index=False)
        categories.to_csv(folder / "leaderboard_categories.csv", index=False)
        bug_board(table).to_csv(folder / "leaderboard_bugs.csv", index=False)
    return text


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo score",
                       description="Recompute the leaderboard of a stored sweep.")
    p.add_argument("sweep_dir", help="a sweep folder, e.g. results/runs/bench")
    p.add_argument("--publish", action="store_true",
                   help="also write the tables into results/")
    p.add_argument("--beside", metavar="SWEEP_DIR",
                   help="also score this sweep's detectors, on the runs both sweeps made "
                        "(e.g. a tool's subset beside results/runs/bench)")
    args = p.parse_args(argv)
    for folder in filter(None, (args.sweep_dir, args.beside)):
        if not Path(folder).is_dir():
            raise UsageError(f"no sweep folder {folder}")
    command = " ".join(["bugzoo score", args.sweep_dir, *(["--publish"] if args.publish else []),
                        *(["--beside", args.beside] if args.beside else [])])
    print(score_sweep(Path(args.sweep_dir), Path("results") if args.publish else None, command,
                      Path(args.beside) if args.beside else None))
    return 0
