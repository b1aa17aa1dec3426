"""``bugzoo report``: a static HTML catalogue of the bugs under ``results/report/``.

``index.html`` lists every bug (filter by category and model, client-side) and shows the
leaderboard when one was published; ``cards.html`` holds the spot-the-bug cards
(:mod:`bugzoo.teach.cards`), whose page names no answer until a card is revealed. ``bugs/<id>.html`` holds one bug's curves, snippets, symptom, validity
statistics and the detectors that caught it. Everything is inline: no CDN, no network.
Missing inputs (curves, validity.csv, a scored sweep, the leaderboard) are left out.
"""

from __future__ import annotations

import html
import logging
import shutil
from pathlib import Path

import pandas as pd

from bugzoo import release, versions
from bugzoo.bugs import ALL_MODELS, CATEGORIES, Bug, flat_id, list_bugs
from bugzoo.detector_registry import DETECTORS, role_of
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.judge.outcomes import outcomes
from bugzoo.judge.scoring import bug_board
from bugzoo.teach.cards import SCRIPT as CARDS_SCRIPT
from bugzoo.teach.cards import cards_page
from bugzoo.teach.catalogue import checked_as

log = logging.getLogger(__name__)

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.85em}
.buggy pre{border-left:4px solid #d62728}.fixed pre{border-left:4px solid #2ca02c}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px}
.bug,.card{border:1px solid #ddd;border-radius:6px;padding:.5em 1em;margin:.5em 0}
.tag{background:#eef;border-radius:3px;padding:0 4px;margin-right:4px;font-size:.8em}
.hidden{display:none}img{max-width:100%}
"""

SCRIPT = """
function applyFilters() {
  const cat = document.getElementById('category').value;
  const model = document.getElementById('model').value;
  let shown = 0;
  document.querySelectorAll('[data-category]').forEach(function (el) {
    const ok = (!cat || el.dataset.category === cat) &&
               (!model || el.dataset.models.split(' ').includes(model));
    el.classList.toggle('hidden', !ok);
    if (ok && el.classList.contains('bug')) { shown += 1; }
  });
  document.getElementById('count').textContent = shown;
}
document.getElementById('category').addEventListener('change', applyFilters);
document.getElementById('model').addEventListener('change', applyFilters);
applyFilters();
"""


def esc(text: object) -> str:
    return html.escape(str(text))


def page(title: str, body: str, script: str = "") -> str:
    js = f"<script>{script}</script>" if script else ""
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{esc(title)}"
            f"</title><style>{STYLE}</style></head><body>{body}{js}</body></html>\n")


def snippets(bug: Bug) -> str:
    return (f"<div class=buggy><h3>BUGGY</h3><pre>{esc(bug.buggy)}</pre></div>"
            f"<div class=fixed><h3>FIXED</h3><pre>{esc(bug.fixed)}</pre></div>")


def table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, float_format=lambda v: f"{v:.3g}", na_rep="")


def catches(sweep_dir: Path | None, results: Path) -> pd.DataFrame:
    """Per (bug, detector that tries to catch bugs): hits over buggy runs, from the sweep when it
    holds runs, else from the published ``leaderboard_bugs.csv``; empty when there is neither.
    The baselines and the integrity rows, which catch nothing by design, are left out."""
    if sweep_dir is not None and any(store.iter_runs(sweep_dir)):
        table = bug_board(outcomes(sweep_dir))
    else:
        published = results / "leaderboard_bugs.csv"
        table = pd.read_csv(published) if published.is_file() else pd.DataFrame()
    if table.empty:
        return table
    installed = set(DETECTORS.names())
    return table[[d not in installed or role_of(d) != "baseline" for d in table["detector"]]]


def bug_page(bug: Bug, curves: Path | None, validity: pd.DataFrame, caught: pd.DataFrame) -> str:
    parts = ["<p><a href='../index.html'>&larr; catalogue</a></p>",
             f"<h1>{esc(bug.id)}: {esc(bug.title)}</h1>",
             f"<p><span class=tag>{esc(bug.category)}</span>"
             f"<span class=tag>{'loud' if bug.loud else 'silent'}</span> models: "
             f"{esc(', '.join(bug.models))}; onset: {esc(bug.onset_text)}; since bugzoo-bench {esc(bug.since)}</p>",
             "<h2>Symptom</h2>", f"<p>{esc(bug.symptom)}</p>",
             f"<p>Checked as: {esc(checked_as(bug))}.</p>"]
    if curves is not None:
        parts.append(f"<h2>Curves</h2><img src='../curves/{esc(curves.name)}' "
                     f"alt='symptom curves of {esc(bug.id)}'>")
    parts += ["<h2>Code</h2>", snippets(bug), "<h2>Why</h2>", f"<p>{esc(bug.explanation)}</p>"]
    rows = validity[validity["bug"] == bug.id] if "bug" in validity else validity
    if len(rows):
        parts += ["<h2>Validity</h2>", table_html(rows)]
    mine = caught[caught["bug"] == bug.id].drop(columns="bug") if len(caught) else caught
    if len(mine):
        parts += ["<h2>Detectors that catch it</h2>",
                  table_html(mine.sort_values("hits", ascending=False))]
    return page(f"bugzoo: {bug.id}", "".join(parts))


def index_page(bugs: list[Bug], leaderboard: str) -> str:
    """The catalogue, filterable, with the leaderboard and a link to the cards."""
    options = lambda values: "".join(f"<option>{esc(v)}</option>" for v in values)  # noqa: E731
    attrs = lambda b: (f"data-category='{esc(b.category)}' "  # noqa: E731
                       f"data-models='{esc(' '.join(b.models))}'")
    entries = "".join(
        f"<div class=bug {attrs(b)}><a href='bugs/{esc(flat_id(b.id))}.html'><b>{esc(b.id)}</b></a> "
        f"<span class=tag>{esc(b.category)}</span>{esc(b.title)}<br><small>"
        f"{esc(b.symptom)}</small></div>" for b in bugs)
    body = (
        "<h1>bugzoo: planted PyTorch training bugs</h1>"
        "<p>Filter: <select id=category><option value=''>all categories</option>"
        f"{options(c for c in CATEGORIES if any(b.category == c for b in bugs))}</select> "
        f"<select id=model><option value=''>all models</option>{options(ALL_MODELS)}</select> "
        "<span id=count></span> bugs shown. <a id=cards href='cards.html'>Spot the bug</a>: "
        "cards that show a symptom and hide the answer.</p>"
        f"<div id=catalogue>{entries}{leaderboard}</div>"
        f"<p><small>Made with {esc(versions())}; {esc(release.stamp())}.</small></p>")
    return page("bugzoo catalogue", body, SCRIPT)


# the leaderboard's columns a reader needs first; every other one is a click away
SHORT_COLUMNS = {"detector": "detector", "role": "role", "score": "score",
                 "recall": "recall", "matched_false_alarm_rate": "control alarms",
                 "healthy_false_alarm_rate": "healthy false alarms",
                 "median_delay_steps": "delay (steps)"}
FIGURES = ("leaderboard.png", "recall_by_category.png")


def short_board(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard in a few columns, each rate with its interval, rounded."""
    shown = pd.DataFrame({"detector": board["detector"], "role": board["role"]})
    for column, title in list(SHORT_COLUMNS.items())[2:]:
        lo, hi = board.get(f"{column}_lo"), board.get(f"{column}_hi")
        shown[title] = [
            "–" if pd.isna(v) else f"{v:.2f}" + ("" if lo is None or pd.isna(lo[i])
                                                else f" [{lo[i]:.2f}, {hi[i]:.2f}]")
            for i, v in board[column].items()]
    return shown


def leaderboard_html(results: Path, out: Path) -> str:
    """The leaderboard's figures, a short table of it, and the whole one on demand."""
    csv, md = results / "leaderboard.csv", results / "leaderboard.md"
    parts = ["<h2>Leaderboard</h2>"]
    for name in FIGURES:
        if (results / name).is_file():
            shutil.copyfile(results / name, out / name)
            parts.append(f"<p><img src='{name}' alt='{name}' style='max-width:100%'></p>")
    if csv.is_file():
        board = pd.read_csv(csv)
        parts += [table_html(short_board(board)),
                  f"<details><summary>every column</summary>{table_html(board.round(3))}"
                  "</details>"]
    elif md.is_file():
        parts.append(f"<pre>{esc(md.read_text())}</pre>")
    return "".join(parts) if len(parts) > 1 else ""


def build(results: Path, out: Path, sweep_dir: Path | None, seed: int = 0) -> Path:
    """Write the catalogue and the cards (shuffled with ``seed``); returns the index path."""
    bugs = list_bugs()
    try:
        (out / "bugs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {out} ({e.strerror or e})") from None
    validity_csv = results / "validity.csv"
    validity = pd.read_csv(validity_csv) if validity_csv.is_file() else pd.DataFrame()
    caught = catches(sweep_dir, results)
    for bug in bugs:
        png = results / "curves" / f"{flat_id(bug.id)}.png"
        if png.is_file():
            (out / "curves").mkdir(exist_ok=True)
            shutil.copyfile(png, out / "curves" / png.name)
        (out / "bugs" / f"{flat_id(bug.id)}.html").write_text(
            bug_page(bug, png if png.is_file() else None, validity, caught))
    index = out / "index.html"
    index.write_text(index_page(bugs, leaderboard_html(results, out)))
    (out / "cards.html").write_text(page("bugzoo: spot the bug",
                                         cards_page(bugs, results, out, seed), CARDS_SCRIPT))
    return index


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo report", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path("results"),
                   help="where curves/, validity.csv and leaderboard.* are read")
    p.add_argument("--sweep", type=Path, default=None,
                   help="a scored sweep: which detectors catch each bug (default: "
                   "results/runs/bench when it is there)")
    p.add_argument("--out", type=Path, default=None, help="default: <results>/report")
    p.add_argument("--seed", type=int, default=0,
                   help="the cards' order, which run is A and the answers' key")
    args = p.parse_args(argv)
    if not args.results.is_dir():
        raise UsageError(f"no results folder {args.results}")
    if args.sweep is not None and not args.sweep.is_dir():
        raise UsageError(f"no sweep folder {args.sweep}")
    default = Path("results/runs/bench")
    index = build(args.results, args.out or args.results / "report",
                  args.sweep or (default if default.is_dir() else None), args.seed)
    print(f"wrote {index} (open it in a browser)")
    return 0
