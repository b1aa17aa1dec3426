"""``bugzoo results provenance rekey``: carry every committed result across a key-scheme change.

A key names what a result's computation read (:mod:`bugzoo.provenance`); a change to how keys
are found (following less of a module, say) moves keys while no result's code changed. Where
the two checkouts differ only in the modules that name results and are never followed
(:attr:`~bugzoo.provenance.Codebase.unfollowed`), every result whose stored key is the one the
old checkout computes was made by code the new checkout shares, so it takes the key the new
checkout computes, and nothing is trained. A result whose stored key the old checkout does not
compute was stale before the change and is left as it was, for its ``--changed`` command.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

import pandas as pd

from bugzoo import release
from bugzoo.errors import UsageError
from bugzoo.harness import traceset
from bugzoo.judge.committed_keys import DECIDING, RESULTS, check_checkout, collect
from bugzoo.provenance import Codebase

# each committed table with a key column, and the kind of key its rows hold, in order
TABLES = {"validity.csv": "validity", "health.csv": "health", "language.csv": "language",
          "validity_exported.csv": "pairs", "tasks.csv": "tasks", "agents.csv": "grades"}
TASK_INDEX = Path("keys") / "index.csv"  # a task set folder's rows, keyed as tasks.csv's


def differing_files(old: Path, new: Path) -> list[str]:
    """The files deciding results (:data:`~bugzoo.judge.committed_keys.DECIDING`) that differ
    between two checkouts (caches left out)."""
    def walk(left: Path, right: Path, prefix: str) -> list[str]:
        compared = filecmp.dircmp(left, right, ignore=["__pycache__"])
        found = [f"{prefix}{name}" for name in compared.left_only + compared.right_only +
                 compared.funny_files]
        found += [f"{prefix}{name}" for name in compared.common_files
                  if not filecmp.cmp(left / name, right / name, shallow=False)]
        for name in compared.common_dirs:
            found += walk(left / name, right / name, f"{prefix}{name}/")
        return found

    out = []
    for name in DECIDING:
        left, right = old / name, new / name
        if left.is_dir() and right.is_dir():
            out += walk(left, right, f"{name}/")
        elif not (left.is_file() and right.is_file() and filecmp.cmp(left, right, shallow=False)):
            out.append(name)
    return sorted(out)


def check_only_the_scheme_moved(old: Path, new: Path) -> None:
    """Refuse unless the checkouts differ only in modules that are never followed."""
    allowed = {f"{module.replace('.', '/')}.py" for module in Codebase.unfollowed}
    others = [name for name in differing_files(old, new) if name not in allowed]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise UsageError(f"rekey carries results across a change of the key scheme alone "
                         f"({', '.join(sorted(allowed))}); these differ too: {shown}. Use "
                         "bugzoo results provenance prove, or the --changed commands")


def rekeyed_lines(path: Path, stored: list[str], old: list[str], new: list[str]) -> tuple[
        str, int, int]:
    """The CSV at ``path`` with each row's stored key that is ``old``'s replaced by ``new``'s;
    how many rows moved and how many were stale already."""
    lines = path.read_text().splitlines(keepends=True)
    if len(lines) != len(stored) + 1:
        raise UsageError(f"{path} has a row spread over lines; rekey edits one line per row")
    moved = stale = 0
    for row, (key, before, after) in enumerate(zip(stored, old, new, strict=True), start=1):
        if key != before:
            stale += 1
        elif after != before:
            if lines[row].count(key) != 1:
                raise UsageError(f"{path} line {row + 1} does not hold its key once")
            lines[row] = lines[row].replace(key, after)
            moved += 1
    return "".join(lines), moved, stale


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def rekey(old: Path, results: Path = RESULTS, task_set: Path | None = None) -> pd.DataFrame:
    """Give every committed result in ``results`` (and the task set folder ``task_set``) the
    key this checkout computes, where its stored key is the one ``old`` computes. One row per
    kind of result: how many moved, and how many were stale before."""
    check_checkout(old)
    check_only_the_scheme_moved(old, RESULTS.parent)
    before, after = collect(old, results), collect(RESULTS.parent, results)
    texts, rows = {}, []
    for name, kind in TABLES.items():
        path = results / name
        stored = pd.read_csv(path, dtype={"key": str})["key"].fillna("").tolist()
        texts[path], moved, stale = rekeyed_lines(path, stored, before[kind], after[kind])
        rows.append({"result": name, "rows": len(stored), "rekeyed": moved, "stale": stale})
    if task_set is not None and (task_set / TASK_INDEX).is_file():
        path = task_set / TASK_INDEX
        index = pd.read_csv(path, dtype={"key": str})
        old_keys, new_keys = (dict(zip(pd.read_csv(results / "tasks.csv")["scenario"], d["tasks"],
                                       strict=True)) for d in (before, after))
        texts[path], moved, stale = rekeyed_lines(
            path, index["key"].fillna("").tolist(), [old_keys.get(s) for s in index["scenario"]],
            [new_keys.get(s) for s in index["scenario"]])
        rows.append({"result": str(path), "rows": len(index), "rekeyed": moved, "stale": stale})
    traces = results / "traces"
    runs = pd.read_parquet(traces / traceset.RUNS_FILE)
    is_old = runs["key"] == runs["scenario"].map(before["runs"])
    rekeyed = runs["key"].where(~is_old, runs["scenario"].map(after["runs"]))
    rows.append({"result": f"traces/{traceset.RUNS_FILE}", "rows": len(runs),
                 "rekeyed": int((is_old & (rekeyed != runs["key"])).sum()),
                 "stale": int((~is_old).sum())})
    for path, text in texts.items():  # every table checked before the first is written
        replace_file(path, text)
    traceset.rewrite_runs(traces, runs.assign(key=rekeyed.astype(runs["key"].dtype)))
    release.live_manifest.cache_clear()
    release.write_manifest(results / release.MANIFEST.name)
    return pd.DataFrame(rows)
