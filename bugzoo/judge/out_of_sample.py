"""The out-of-sample result: the built-in detectors on bugs they were never developed on.

Every bug records the release it joined (``Bug.since``). The built-in detectors were written
and tuned while the catalogue was ``TUNED_ON``'s; bugs that joined later are, for them, bugs
never seen. Scored on the same sweep as the reference board, with the same paired rules, the
two sets side by side show how much of the in-catalogue figure is in-sample.
``results/out_of_sample.md`` records the detectors' code digest it was measured with, so a
later change to the detectors cannot be read into it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from bugzoo.bugs import builtin_ids, get_bug
from bugzoo.errors import UsageError
from bugzoo.judge.figures import out_of_sample_figure
from bugzoo.judge.outcomes import with_suites
from bugzoo.judge.scoring import _fmt, apart_board, leaderboard, pairs, silent
from bugzoo.judge.stats import clopper_pearson
from bugzoo.judge.tables import markdown
from bugzoo.judge.templates import render

TUNED_ON = "1.0"  # the release whose bugs the built-in detectors were developed and tuned on
PLUGIN = "plug-in"  # what a bug from outside the catalogue joined: never a release tuned on
OUT_OF_SAMPLE_FILE = "out_of_sample.md"
OUT_OF_SAMPLE_FIGURE = "out_of_sample.png"
OUT_OF_SAMPLE_TABLE = "out_of_sample.csv"  # both boards, a row per detector and set of bugs
DETECTORS_DIR = Path(__file__).resolve().parents[2] / "detectors"
SUITES = ("suite: built-ins", "suite: sealed", "suite: generic")
# models that joined after ``TUNED_ON``: the detectors were tuned before they existed
UNSEEN_MODELS = ("gpt",)


def detectors_digest(folder: Path = DETECTORS_DIR) -> str:
    """A hash of the built-in detectors' code (every ``.py`` under ``detectors/``)."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def releases(table: pd.DataFrame) -> dict[str, str | None]:
    """The release each bug of the sweep joined: :data:`PLUGIN` for a bug from outside the
    catalogue, whatever its ``since`` says (the detectors were never tuned on it); None for a
    bug not installed here."""
    joined, catalogue = {}, set(builtin_ids())
    for bug in table["bug"].dropna().unique():
        try:
            since = get_bug(bug).since
        except UsageError:  # a plug-in's bug from another machine: neither side
            joined[bug] = None
            continue
        joined[bug] = since if bug in catalogue else PLUGIN
    return joined


def by_release(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``table`` (suite rows included) split into the runs of bugs the detectors were tuned on
    and of bugs that joined later; the healthy variants' runs belong to both."""
    joined = table["bug"].map(releases(table))
    clean = table["run_role"] == "clean"
    return table[clean | (joined == TUNED_ON)], table[clean | (joined.notna()
                                                              & (joined != TUNED_ON))]


def by_joined(unseen: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The unseen runs (suite rows included) by the release their bug joined, each with the
    healthy variants' runs."""
    joined = unseen["bug"].map(releases(unseen))
    clean = unseen["run_role"] == "clean"
    return {release: unseen[clean | (joined == release)]
            for release in sorted(joined.dropna().unique())}


def by_model(seen: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tuned-on bugs' runs (suite rows included) on the models the detectors were tuned
    on, and on the models that joined later, each with those models' healthy variants."""
    later = seen["model"].isin(UNSEEN_MODELS)
    return {"the models they were tuned on": seen[~later],
            f"models that joined later ({', '.join(UNSEEN_MODELS)})": seen[later]}


def per_bug(runs: pd.DataFrame, detector: str) -> pd.DataFrame:
    """One row per bug for one detector or suite over its silent pairs: recall with its exact
    interval over the bug's judged pairs, control alarms, the paired score and the delays of
    its hits (median, with the fastest and slowest)."""
    p = pairs(silent(runs[runs["detector"] == detector]))
    rows = []
    for bug, g in p.groupby("bug"):
        judged = g[g["judged"]]
        delays = g.loc[g["hit"] == 1, "delay_steps"].astype(float)
        recall = clopper_pearson(int(judged["hit"].sum()), len(judged))
        rows.append({
            "bug": bug, "category": g["category"].iloc[0],
            "models": ", ".join(sorted(g["model"].unique())), "pairs": len(g),
            "hits": int(judged["hit"].sum()), "recall": recall[0], "recall_lo": recall[1],
            "recall_hi": recall[2], "control_alarms": int(judged["control_alarm"].sum()),
            "score": float(g["value"].mean()),
            "delay": (f"{delays.median():.0f} ({delays.min():.0f}-{delays.max():.0f})"
                      if len(delays) else "–"),
            "midrun": bool((g["onset"] > 0).any()),
        })
    return pd.DataFrame(rows)


def _interval(row: pd.Series, key: str) -> str:
    return _fmt(row[key], row[f"{key}_lo"], row[f"{key}_hi"])


def suite_rows(key: str, boards: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The suites' rows of several boards, each named in column ``key``: bugs and pairs,
    score, recall and control alarms with their intervals."""
    return pd.DataFrame([{
        key: name, "detector": suite,
        "bugs (pairs)": f"{int(row['bugs'])} ({int(row['pairs'])})",
        "score": _interval(row, "score"), "recall": _interval(row, "recall"),
        "control alarms": _interval(row, "matched_false_alarm_rate")}
        for name, board in boards.items()
        for suite, row in board.set_index("detector").iterrows() if suite in SUITES])


def side_by_side(seen: pd.DataFrame, unseen: pd.DataFrame) -> pd.DataFrame:
    """Each built-in detector and suite that caught anything, unseen bugs beside the bugs it
    was tuned on; the baselines last, for scale."""
    a, b = unseen.set_index("detector"), seen.set_index("detector")
    shown = [d for d in a.index if a.loc[d, "role"] in ("suite", "heuristic", "tool")
             and (a.loc[d, "recall"] > 0 or b.loc[d, "recall"] > 0)]
    shown += [d for d in a.index if a.loc[d, "role"] == "baseline"]
    return pd.DataFrame([{
        "detector": d, "score, unseen bugs": _interval(a.loc[d], "score"),
        "recall, unseen bugs": _interval(a.loc[d], "recall"),
        "control alarms, unseen": _interval(a.loc[d], "matched_false_alarm_rate"),
        "median delay, unseen (steps)": _fmt(a.loc[d, "median_delay_steps"],
                                             a.loc[d, "median_delay_steps_lo"],
                                             a.loc[d, "median_delay_steps_hi"], 0),
        "score, tuned-on bugs": _interval(b.loc[d], "score"),
        "recall, tuned-on bugs": _interval(b.loc[d], "recall"),
    } for d in shown])


def write_out_of_sample(table: pd.DataFrame, folder: Path, command: str, stamp: str) -> None:
    """``out_of_sample.md``, its figure and ``out_of_sample.csv`` (the leaderboard's columns,
    on the tuned-on bugs and on the unseen ones: column ``bug_set``) into ``folder``."""
    runs = with_suites(table)
    seen, unseen = by_release(runs)
    board_seen, board_unseen = leaderboard(seen), leaderboard(unseen)
    per_release = {release: leaderboard(r) for release, r in by_joined(unseen).items()}
    (folder / OUT_OF_SAMPLE_FILE).write_text(
        out_of_sample_page(runs, command, stamp, (seen, unseen), (board_seen, board_unseen),
                           per_release))
    pd.concat([board_seen.assign(bug_set="tuned-on"), board_unseen.assign(bug_set="unseen"),
               *(board.assign(bug_set=f"joined {release}")
                 for release, board in per_release.items())],
              ignore_index=True).to_csv(folder / OUT_OF_SAMPLE_TABLE, index=False)
    shown = board_unseen[board_unseen["detector"].isin(
        side_by_side(board_seen, board_unseen)["detector"])
        & (board_unseen["role"] != "baseline")]
    out_of_sample_figure(board_seen, shown, folder / OUT_OF_SAMPLE_FIGURE,
                         "The built-in detectors on bugs they never saw",
                         f"bugs of {TUNED_ON}, which they were tuned on", "bugs that joined later")


def out_of_sample_page(table: pd.DataFrame, command: str, stamp: str,
                       split: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                       boards: tuple[pd.DataFrame, pd.DataFrame] | None = None,
                       per_release: dict[str, pd.DataFrame] | None = None) -> str:
    """``results/out_of_sample.md`` from a sweep's outcome table (``split``, ``boards`` and
    ``per_release``: its runs by release, their leaderboards and the unseen bugs' board per
    release they joined, when the caller has them already)."""
    runs = with_suites(table)
    seen, unseen = split or by_release(runs)
    board_seen, board_unseen = boards or (leaderboard(seen), leaderboard(unseen))
    if per_release is None:
        per_release = {release: leaderboard(r) for release, r in by_joined(unseen).items()}
    joined = sorted(set(releases(unseen).values()))
    later = [release for release in joined if release != PLUGIN]
    afterwards = " and ".join(
        ([f"the bugs that joined in {', '.join(later)}"] if later else [])
        + (["the bugs from outside the catalogue (plug-ins)"] if PLUGIN in joined else []))
    suite = board_unseen.set_index("detector").loc["suite: built-ins"]
    on_models = {name: leaderboard(runs) for name, runs in by_model(seen).items()
                 if (runs["run_role"] != "clean").any()}
    return render(
        "out_of_sample", command=command, stamp=stamp, tuned_on=TUNED_ON, afterwards=afterwards,
        detectors_digest=detectors_digest(), unseen_bugs=int(suite["bugs"]),
        unseen_pairs=int(suite["pairs"]), figure=OUT_OF_SAMPLE_FIGURE,
        side_by_side=markdown(side_by_side(board_seen, board_unseen)),
        by_release=markdown(suite_rows("release", per_release)) if len(per_release) > 1 else "",
        by_model=markdown(suite_rows("models", on_models)) if len(on_models) > 1 else "",
        per_bug=_per_bug_tables(unseen), apart=_apart_tables(unseen)).rstrip() + "\n"


def _per_bug_tables(unseen: pd.DataFrame) -> dict[str, str]:
    """Each suite's table of the unseen bugs, one row per bug, where the suite forms."""
    tables = {}
    for name in SUITES:
        bugs = per_bug(unseen, name)
        if bugs.empty:  # a suite these detectors do not form
            continue
        bugs = bugs.sort_values(["recall", "bug"])
        shown = bugs.assign(
            recall=[_fmt(r, lo, hi) for r, lo, hi in zip(bugs.recall, bugs.recall_lo,
                                                         bugs.recall_hi, strict=True)],
            score=bugs.score.map(lambda v: f"{v:+.2f}"),
            midrun=bugs.midrun.map({True: "yes", False: ""}))
        tables[name] = markdown(shown[["bug", "category", "models", "pairs", "hits", "recall",
                                       "control_alarms", "score", "delay", "midrun"]])
    return tables


def _apart_tables(unseen: pd.DataFrame) -> dict[str, str]:
    """The suites on the unseen bugs scored apart (loud, unproven, visible at setup), by title."""
    tables = {}
    for kind, title in (("loud", "Loud unseen bugs (a crash or a hang), scored apart"),
                        ("unproven", "Unproven unseen scenarios, scored apart"),
                        ("visible", "Unseen bugs visible at setup, scored apart")):
        apart = apart_board(unseen, kind)
        apart = apart[apart["detector"].isin(SUITES)]
        if len(apart):
            tables[title] = markdown(apart.assign(
                score=[_fmt(v, lo, hi) for v, lo, hi in zip(apart.score, apart.score_lo,
                                                            apart.score_hi, strict=True)],
                recall=[_fmt(v, lo, hi) for v, lo, hi in zip(apart.recall, apart.recall_lo,
                                                             apart.recall_hi, strict=True)])
                [["detector", "runs", "score", "recall", "early"]])
    return tables


def has_unseen_bugs(table: pd.DataFrame) -> bool:
    """Whether the sweep holds any bug that joined after ``TUNED_ON``."""
    return any(release not in (None, TUNED_ON) for release in releases(table).values())
