"""``bugzoo results provenance rekey``: every committed result crosses a change of the key
scheme alone, and only such a change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from bugzoo.cli import main
from bugzoo.harness import traceset
from bugzoo.judge import rekey
from bugzoo.judge.changed_cost import edited_copy
from bugzoo.judge.committed_keys import collect

ROOT = Path(__file__).resolve().parents[1]
# a change of the scheme alone: every key it makes moves, no result's code does
OLD_SCHEME = ("bugzoo/provenance.py", "json.dumps(parts, sort_keys=True)",
              'json.dumps(["an older scheme", parts], sort_keys=True)')


def results_copy(folder: Path) -> Path:
    """The committed results a rekey reads and writes."""
    folder.mkdir()
    for name in [*rekey.TABLES, "release.json"]:
        shutil.copyfile(ROOT / "results" / name, folder / name)
    shutil.copytree(ROOT / "results" / "traces", folder / "traces")
    return folder


def test_results_made_under_an_older_scheme_take_todays_keys_and_nothing_else_moves(
        tmp_path):
    old = edited_copy(ROOT, tmp_path / "old", OLD_SCHEME)
    results = results_copy(tmp_path / "results")
    then = collect(old, results)
    for name, kind in rekey.TABLES.items():  # the results as the older scheme keyed them
        table = pd.read_csv(results / name, dtype={"key": str})
        table.assign(key=then[kind]).to_csv(results / name, index=False)
    runs = pd.read_parquet(results / "traces" / traceset.RUNS_FILE)
    stale = runs.index[:3]  # a few runs stale already: they must stay as they were
    keys = runs["scenario"].map(then["runs"]).where(~runs.index.isin(stale), "stale")
    traceset.rewrite_runs(results / "traces", runs.assign(key=keys.astype(runs["key"].dtype)))

    moved = rekey.rekey(old, results)
    after = pd.read_parquet(results / "traces" / traceset.RUNS_FILE)
    assert after.loc[~after.index.isin(stale)].equals(runs.loc[~runs.index.isin(stale)])
    assert (after.loc[stale, "key"] == "stale").all()
    for name in rekey.TABLES:
        committed = pd.read_csv(ROOT / "results" / name, dtype={"key": str})
        assert pd.read_csv(results / name, dtype={"key": str}).equals(committed), name
    assert json.loads((results / "release.json").read_text()) == json.loads(
        (ROOT / "results" / "release.json").read_text())
    counts = moved.set_index("result")
    assert counts.loc["validity.csv", "rekeyed"] == len(then["validity"])
    assert counts.loc[f"traces/{traceset.RUNS_FILE}", "stale"] == len(stale)


def test_a_checkout_that_differs_beyond_the_scheme_is_refused_and_nothing_is_written(
        tmp_path, capsys):
    old = edited_copy(ROOT, tmp_path / "old", ("bugzoo/harness/record.py",
                                               '"steps_completed": int(len(trace)),',
                                               '"steps_completed": int(len(trace)) + 0,'))
    before = (ROOT / "results" / "validity.csv").read_bytes()
    assert main(["results", "provenance", "rekey", "--against", str(old)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "these differ too: bugzoo/harness/record.py" in err[0]
    assert (ROOT / "results" / "validity.csv").read_bytes() == before
