"""The leaderboard as pictures: each detector's score with its interval, and recall by category.

``bugzoo score`` writes both beside ``leaderboard.md``: ``leaderboard.png`` (detectors down,
the paired score across, its 95% interval as a bar; suites, baselines and integrity rows in
colours of their own) and ``recall_by_category.png`` (detectors down, bug categories across,
recall in each cell, the baselines and integrity rows left out); with ``--publish``,
``out_of_sample.png`` (each detector's score on the bugs it was tuned on beside its score on
bugs it never saw).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

ROLE_COLOURS = {"suite": "#2ca02c", "heuristic": "#1f77b4", "tool": "#9467bd",
                "baseline": "#7f7f7f"}
TEXT, TICKS = 10, 9
SCORE_LABEL = "score: paired Youden's J, macro-averaged over bugs (95% interval over bugs)"


def score_errors(rows: pd.DataFrame) -> list[pd.Series]:
    """The interval of each row's score as error-bar lengths below and above it."""
    return [(rows["score"] - rows["score_lo"]).clip(lower=0).fillna(0),
            (rows["score_hi"] - rows["score"]).clip(lower=0).fillna(0)]


def score_axis(ax, y: np.ndarray, labels) -> None:
    """Detectors down at ``y``, the paired score across from -1 to 1, 0 marked."""
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(y, labels, fontsize=TICKS)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel(SCORE_LABEL, fontsize=TEXT)
    ax.tick_params(axis="x", labelsize=TICKS)


def finish(fig: Figure, ax, title: str, png: Path) -> Path:
    """Title, score grid and the file."""
    ax.set_title(title, fontsize=TEXT + 1)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return png


def leaderboard_figure(board: pd.DataFrame, png: Path, title: str) -> Path:
    """Each detector's score with its interval, best first."""
    rows = board.iloc[::-1]  # best at the top
    fig = Figure(figsize=(8.5, 0.32 * len(rows) + 1.6))
    ax = fig.subplots()
    y = np.arange(len(rows))
    colours = [ROLE_COLOURS.get(role, "#1f77b4") for role in rows["role"]]
    ax.errorbar(rows["score"], y, xerr=score_errors(rows), fmt="none", ecolor="0.55",
                elinewidth=1.2, capsize=2)
    ax.scatter(rows["score"], y, c=colours, s=28, zorder=3)
    score_axis(ax, y, rows["detector"])
    for role, colour in ROLE_COLOURS.items():
        if role in set(rows["role"]):
            ax.scatter([], [], c=colour, s=28,
                       label={"baseline": "baseline or integrity row"}.get(role, role))
    ax.legend(fontsize=TICKS, loc="lower right")
    return finish(fig, ax, title, png)


def category_figure(categories: pd.DataFrame, png: Path, title: str,
                    leave_out: set[str] = frozenset()) -> Path:
    """Recall of each detector (rows, best overall first) on each bug category (columns); the
    baselines and integrity rows are ``leave_out``: their recall says nothing, since they
    alarm on the controls alike (their score, 0, is on the leaderboard)."""
    shown = categories[~categories["detector"].isin(leave_out)]
    recall = shown.pivot(index="detector", columns="category", values="recall")
    recall = recall.loc[recall.mean(axis=1).sort_values(ascending=False).index]
    fig = Figure(figsize=(0.7 * len(recall.columns) + 3.2, 0.3 * len(recall) + 1.8))
    ax = fig.subplots()
    image = ax.imshow(recall.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis",
                      aspect="auto")
    ax.set_xticks(range(len(recall.columns)), recall.columns, rotation=45, ha="right",
                  fontsize=TICKS)
    ax.set_yticks(range(len(recall)), recall.index, fontsize=TICKS)
    for (i, j), value in np.ndenumerate(recall.to_numpy(dtype=float)):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=7,
                    color="white" if value < 0.6 else "black")
    fig.colorbar(image, ax=ax, label="recall (macro over the category's bugs)")
    ax.set_title(title, fontsize=TEXT + 1)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return png


def out_of_sample_figure(seen: pd.DataFrame, unseen: pd.DataFrame, png: Path, title: str,
                         seen_label: str, unseen_label: str) -> Path:
    """Each detector's score (95% interval over bugs) on two sets of bugs, one row each: the
    detectors of ``unseen``'s order, both boards' rows for them."""
    detectors = list(unseen["detector"])[::-1]  # the first at the top
    a, b = seen.set_index("detector"), unseen.set_index("detector")
    fig = Figure(figsize=(8.5, 0.38 * len(detectors) + 1.8))
    ax = fig.subplots()
    y = np.arange(len(detectors))
    for board, offset, colour, label in ((a, 0.15, "#7f7f7f", seen_label),
                                         (b, -0.15, "#d62728", unseen_label)):
        rows = board.reindex(detectors)
        ax.errorbar(rows["score"], y + offset, xerr=score_errors(rows), fmt="o", color=colour,
                    ecolor=colour, elinewidth=1.2, capsize=2, ms=4, label=label)
    score_axis(ax, y, detectors)
    ax.legend(fontsize=TICKS, loc="lower right")
    return finish(fig, ax, title, png)
