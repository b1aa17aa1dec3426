"""Scoring: outcome classes, delays, rates with intervals, leaderboard files."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bugzoo.harness import store
from bugzoo.judge import scoring

DETECTORS = ("a", "b")


def write(root, scenario, seed, alarms, bug=None, category=None, onset=0, loud=False,
          steps=10, overhead=0.01):
    trace = pd.DataFrame({"step": range(steps), "loss": 1.0,
                          "elapsed_s": [0.5 * (i + 1) for i in range(steps)]})
    summary = {"scenario": scenario, "seed": seed, "bug": bug, "category": category,
               "onset": onset if bug else None, "loud": loud, "outcome": "completed",
               "detectors": {d: {"error": None, "seconds": 0.0, "overhead": overhead,
                                 "alarms": 0} for d in DETECTORS}}
    frame = pd.DataFrame(alarms, columns=store.ALARM_COLUMNS)
    store.write_run(store.run_dir(root, "sw", scenario, seed), {}, trace, frame, summary)


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "runs"
    # buggy, onset 4: a hits at step 6 with the right category; b alarms early at step 2
    write(root, "mlp-lr_too_high", 0, [("a", 6, "s", "optim", ""), ("a", 8, "s", "loss", ""),
                                       ("b", 2, "s", "optim", "")],
          bug="lr_too_high", category="optim", onset=4)
    # buggy, onset 0: a hits at 3 with a wrong category; b misses
    write(root, "mlp-double_softmax", 0, [("a", 3, "s", "optim", "")], bug="double_softmax",
          category="loss")
    # clean: a raises a false alarm, b is quiet
    write(root, "mlp-clean", 0, [("a", 1, "s", "optim", "")])
    write(root, "mlp-lr_too_high.control", 0, [])
    # loud bug: scored apart
    write(root, "mlp-crash", 0, [("b", 0, "s", "numerics", "")], bug="crash",
          category="numerics", loud=True)
    return root / "sw"


def test_outcomes_classify_each_detector_run(sweep):
    t = scoring.outcomes(sweep).set_index(["detector", "scenario"])
    assert t.loc[("a", "mlp-lr_too_high"), "outcome"] == "hit"
    assert t.loc[("a", "mlp-lr_too_high"), "delay_steps"] == 2
    # onset 4 begins at elapsed 2.0 s (end of step 3); the alarm step 6 ends at 3.5 s
    assert t.loc[("a", "mlp-lr_too_high"), "delay_s"] == pytest.approx(1.5)
    assert t.loc[("a", "mlp-lr_too_high"), "diagnosed"] == True  # noqa: E712
    assert t.loc[("b", "mlp-lr_too_high"), "outcome"] == "early"
    assert t.loc[("a", "mlp-double_softmax"), "diagnosed"] == False  # noqa: E712
    assert t.loc[("b", "mlp-double_softmax"), "outcome"] == "miss"
    assert t.loc[("a", "mlp-clean"), "outcome"] == "false_alarm"
    assert t.loc[("b", "mlp-clean"), "outcome"] == "quiet"
    assert t.loc[("a", "mlp-lr_too_high.control"), "outcome"] == "quiet"


def test_leaderboard_rates_and_loud_apart(sweep):
    table = scoring.outcomes(sweep)
    board = scoring.leaderboard(table).set_index("detector")
    a, b = board.loc["a"], board.loc["b"]
    assert a["runs"] == 4 and a["recall"] == 1.0 and a["false_alarm_rate"] == 0.5
    assert a["precision"] == pytest.approx(2 / 3)
    assert a["f1"] == pytest.approx(0.8)
    assert a["diagnosis_accuracy"] == 0.5
    assert a["median_delay_steps"] == 2.5
    assert b["recall"] == 0.0 and b["precision"] == 0.0 and b["false_alarm_rate"] == 0.0
    assert a["overhead"] == pytest.approx(0.01)
    loud = scoring.loud_board(table).set_index("detector")
    assert loud.loc["b", "recall"] == 1.0 and loud.loc["a", "recall"] == 0.0
    cats = scoring.category_board(table)
    assert set(cats["category"]) == {"optim", "loss", "numerics"}


def test_builtin_suite_counts_a_run_by_its_first_alarm(sweep):
    board = scoring.leaderboard(scoring.outcomes(sweep)).set_index("detector")
    assert "suite: all" not in board.index  # no real tool watched: the two would be equal
    suite = board.loc["suite: built-ins"]
    # lr_too_high: b's alarm at step 2 comes first, before onset 4 -> early, not a hit;
    # double_softmax: a's hit at 3 (wrong category); clean: a's false alarm; control quiet
    assert suite["runs"] == 4 and suite["hits"] == 1 and suite["early"] == 1
    assert suite["recall"] == 0.5 and suite["false_alarm_rate"] == 0.5
    assert suite["diagnosis_accuracy"] == 0.0 and suite["median_delay_steps"] == 3
    assert suite["overhead"] == pytest.approx(0.02)  # both members' shares add up


def test_suite_all_adds_the_real_tools(sweep, monkeypatch):
    monkeypatch.setattr(scoring, "REAL_TOOLS", ("b",))
    board = scoring.leaderboard(scoring.outcomes(sweep)).set_index("detector")
    assert "suite: built-ins" not in board.index  # a alone is no suite
    assert board.loc["suite: all", "early"] == 1 and board.loc["suite: all", "hits"] == 1


def test_wilson_and_bootstrap_intervals():
    p, lo, hi = scoring.wilson(0, 10)
    assert p == 0 and lo == 0 and hi == pytest.approx(0.2775, abs=1e-4)
    p, lo, hi = scoring.wilson(5, 10)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)
    assert all(math.isnan(v) for v in scoring.wilson(0, 0))
    m, lo, hi = scoring.bootstrap([*range(1, 21), 1000, None, float("nan")])
    assert m == 11 and lo < m < hi < 1000


def test_score_cli_writes_tables_and_publishes(sweep, tmp_path, monkeypatch, capsys):
    from bugzoo.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["score", str(sweep), "--publish"]) == 0
    for folder in (sweep, tmp_path / "results"):
        md = (folder / "leaderboard.md").read_text()
        assert f"bugzoo score {sweep} --publish" in md and "## Per bug category" in md
        csv = pd.read_csv(folder / "leaderboard.csv")
        assert {"detector", "runs", "recall", "false_alarm_rate", "precision", "f1",
                "diagnosis_accuracy", "median_delay_steps", "overhead"} <= set(csv.columns)
        assert set(csv["detector"]) == {"a", "b", "suite: built-ins"}
    assert "| a | 4 |" in capsys.readouterr().out
    assert main(["score", str(tmp_path / "nope")]) == 2
