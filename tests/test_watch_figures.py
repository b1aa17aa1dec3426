"""results/watch.md is what ``bugzoo task watched`` writes from its own CSVs, and the loops it
watches are the ones in tests/loops."""

from __future__ import annotations

import pandas as pd

from bugzoo.paths import ROOT
from bugzoo.teach.tasks.watched import COMMAND, LOOP_FACTS, LOOPS, jobs, report

RESULTS = ROOT / "results"


def test_the_watch_page_is_its_measurements_reported():
    rows = pd.read_csv(RESULTS / "watch.csv")
    times = pd.read_csv(RESULTS / "watch_times.csv")
    assert (RESULTS / "watch.md").read_text() == report(rows, times, COMMAND)


def test_the_measured_scripts_are_todays_jobs():
    rows = pd.read_csv(RESULTS / "watch.csv")
    today = {(j["scenario"], j["variant"]) for j in jobs()}
    assert set(zip(rows["scenario"], rows["variant"], strict=True)) == today
    assert set(LOOP_FACTS) == {p.stem for p in LOOPS.glob("*.py")}
    assert (rows["exit"] == 0).all(), rows[rows["exit"] != 0]
