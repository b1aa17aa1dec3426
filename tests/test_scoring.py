"""Scoring: outcome classes, a score that rewards discrimination, suites, the tables."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import pytest

from bugzoo.harness import store
from bugzoo.judge import scoring
from bugzoo.judge.stats import bootstrap, clopper_pearson, upper_bound
from bugzoo.registry import OWN_DISTRIBUTION

STEPS = 300


def status(role="heuristic", distribution=OWN_DISTRIBUTION):
    return {"error": None, "seconds": 0.0, "call_share": 0.0, "alarms": 0, "role": role,
            "distribution": distribution, "version": "0.1.0"}


def write(root, scenario, seed, alarms, detectors, bug=None, category=None, onset=0,
          loud=False, model="mlp", latent=False):
    trace = pd.DataFrame({"step": range(STEPS), "loss": 1.0,
                          "elapsed_s": [0.5 * (i + 1) for i in range(STEPS)]})
    summary = {"scenario": scenario, "seed": seed, "model": model, "bug": bug,
               "category": category, "onset": onset if bug else None, "loud": loud,
               "latent": latent, "outcome": "completed", "detectors": detectors}
    frame = pd.DataFrame(alarms, columns=store.ALARM_COLUMNS)
    store.write_run(store.run_dir(root, "sw", scenario, seed), {}, trace, frame, summary)


@pytest.fixture
def sweep(tmp_path):
    """Detectors a and b (built-ins) on a small mix of runs."""
    root, both = tmp_path / "runs", {"a": status(), "b": status()}
    # buggy, onset 4: a hits at step 6 with the right category; b alarms early at step 2
    write(root, "mlp-lr_too_high", 0, [("a", 6, "s", "optim", ""), ("a", 8, "s", "loss", ""),
                                       ("b", 2, "s", "optim", "")], both,
          bug="lr_too_high", category="optim", onset=4)
    # buggy, onset 0: a hits at 3 with a wrong category; b misses
    write(root, "mlp-double_softmax", 0, [("a", 3, "s", "optim", "")], both,
          bug="double_softmax", category="loss")
    # clean: a raises a false alarm, b is quiet; a second clean run is quiet for both
    write(root, "mlp-clean", 0, [("a", 1, "s", "optim", "")], both)
    write(root, "mlp-clean-batch128", 0, [], both)
    # loud bug: scored apart
    write(root, "mlp-crash", 0, [("b", 0, "s", "numerics", "")], both, bug="crash",
          category="numerics", loud=True)
    # latent bug (no outcome symptom in its setting): scored apart, a's alarm counts nowhere else
    write(root, "mlp-quiet_bug", 0, [("a", 2, "s", "loop", "")], both, bug="quiet_bug",
          category="loop", latent=True)
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
    assert t.loc[("a", "mlp-clean-batch128"), "outcome"] == "quiet"  # clean: no bug, any id


def test_leaderboard_rates_score_and_loud_apart(sweep):
    table = scoring.outcomes(sweep)
    board = scoring.leaderboard(table).set_index("detector")
    a, b = board.loc["a"], board.loc["b"]
    assert (a["buggy_runs"], a["clean_runs"], a["hits"], a["misses"]) == (2, 2, 2, 0)
    assert a["recall"] == 1.0 and a["false_alarm_rate"] == 0.5
    # lr_too_high's onset 4: both clean runs were quiet before step 4 and neither alarmed
    # from it on; double_softmax's onset 0: one of the two clean runs alarmed
    assert a["matched_false_alarm_rate"] == pytest.approx(0.25)
    assert a["score"] == pytest.approx(0.75)
    assert a["diagnosis_accuracy"] == 0.5
    assert a["median_delay_steps"] == 3 and a["median_delay_steps_midrun"] == 2
    # b: early on lr_too_high (not a chance to hit), missed double_softmax
    assert (b["early"], b["hits"], b["misses"], b["recall"], b["score"]) == (1, 0, 1, 0.0, 0.0)
    loud = scoring.apart_board(table, "loud").set_index("detector")
    assert loud.loc["b", "runs"] == 1 and loud.loc["b", "early"] == 0
    assert loud.loc["b", "recall"] == 1.0 and loud.loc["a", "recall"] == 0.0
    latent = scoring.apart_board(table, "latent").set_index("detector")
    assert latent.loc["a", "runs"] == 1 and latent.loc["a", "recall"] == 1.0
    assert latent.loc["b", "recall"] == 0.0
    assert set(scoring.category_board(table)["category"]) == {"optim", "loss"}


def constant_detector_sweep(root, alarm_at):
    """Every run watched by one detector that alarms at step ``alarm_at`` (None: never), on a
    mix of clean runs and buggy runs with onsets 0, 50 and 150."""
    watch = {"d": status()}
    alarm = [] if alarm_at is None else [("d", alarm_at, "s", "unknown", "")]
    for seed in range(3):
        for scenario in ("mlp-clean", "mlp-clean-batch128", "lstm-clean"):
            write(root, scenario, seed, alarm, watch)
        for scenario, onset in (("mlp-double_softmax", 0), ("mlp-frozen_layers", 50),
                                ("mlp-no_clipping_spike", 150)):
            write(root, scenario, seed, alarm, watch, bug=scenario[4:], category="loss",
                  onset=onset)
    return root / "sw"


@pytest.mark.parametrize("alarm_at", [None, 0, 1, 49, 50, 120, 150, 299])
def test_a_detector_that_ignores_the_run_scores_exactly_zero(tmp_path, alarm_at):
    """An alarm at a fixed step tells nothing about the bug, whatever the step: recall and the
    matched false-alarm rate move together and the score stays 0 (F1 or pooled precision
    would rank the alarm at step 0 near the top)."""
    board = scoring.leaderboard(scoring.outcomes(constant_detector_sweep(tmp_path, alarm_at)))
    row = board.set_index("detector").loc["d"]
    assert row["score"] == pytest.approx(0.0)
    assert row["score_lo"] <= 0.0 <= row["score_hi"]


def test_a_detector_that_sees_the_bug_scores_high(tmp_path):
    root, watch = tmp_path / "runs", {"d": status()}
    for seed in range(4):
        write(root, "mlp-clean", seed, [], watch)
        write(root, "mlp-frozen_layers", seed, [("d", 52, "s", "optim", "")], watch,
              bug="frozen_layers", category="optim", onset=50)
    row = scoring.leaderboard(scoring.outcomes(root / "sw")).set_index("detector").loc["d"]
    assert row["score"] == 1.0 and row["recall"] == 1.0 and row["false_alarm_rate"] == 0.0
    assert row["median_delay_steps_midrun"] == 2 and math.isnan(row["median_delay_steps"])


def test_suites_take_the_first_alarm_and_trust_the_quieter_member(tmp_path):
    root = tmp_path / "runs"
    watch = {"loud": status(), "quiet": status(), "tool": status(role="tool"),
             "base": status(role="baseline"), "theirs": status(distribution="their-tools")}
    # both members alarm at step 5 on the buggy run: "loud" also alarms on the clean run
    write(root, "mlp-double_softmax", 0, [("loud", 5, "s", "optim", ""),
                                          ("quiet", 5, "s", "loss", ""),
                                          ("base", 0, "s", "unknown", ""),
                                          ("theirs", 0, "s", "unknown", "")],
          watch, bug="double_softmax", category="loss")
    write(root, "mlp-clean", 0, [("loud", 9, "s", "optim", ""), ("base", 0, "s", "unknown", ""),
                                 ("theirs", 0, "s", "unknown", "")], watch)
    table = scoring.with_suites(scoring.outcomes(root / "sw"))
    suite = table[table["detector"] == "suite: built-ins"].set_index("scenario")
    assert suite.loc["mlp-double_softmax", "alarm_category"] == "loss"  # quiet's diagnosis
    assert suite.loc["mlp-double_softmax", "outcome"] == "hit"  # the baseline's step 0 ignored
    assert suite.loc["mlp-clean", "outcome"] == "false_alarm"
    assert scoring.form_suites({d: (s["role"], s["distribution"]) for d, s in watch.items()}) \
        == {"suite: built-ins": ["loud", "quiet"],
            "suite: built-ins + tools": ["loud", "quiet", "tool"]}


def test_exact_and_bootstrap_intervals():
    p, lo, hi = clopper_pearson(0, 10)
    assert p == 0 and lo == 0 and hi == pytest.approx(0.3085, abs=1e-4)
    p, lo, hi = clopper_pearson(5, 10)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)
    assert all(math.isnan(v) for v in clopper_pearson(0, 0))
    assert upper_bound(0, 200) <= 0.015  # 200 quiet clean runs: at most 1.5% false alarms
    m, lo, hi = bootstrap([*range(1, 21), 1000, None, float("nan")])
    assert m == 11 and lo < m < hi < 1000


def test_score_cli_writes_tables_and_publishes(sweep, tmp_path, monkeypatch, capsys):
    from bugzoo.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["score", str(sweep), "--publish"]) == 0
    for folder in (sweep, tmp_path / "results"):
        md = (folder / "leaderboard.md").read_text()
        assert f"bugzoo score {sweep} --publish" in md and "## Per bug category" in md
        csv = pd.read_csv(folder / "leaderboard.csv")
        assert {"detector", "buggy_runs", "clean_runs", "recall", "false_alarm_rate", "score",
                "median_delay_steps", "overhead", "role", "source"} <= set(csv.columns)
        assert set(csv["detector"]) == {"a", "b", "suite: built-ins"}
        assert list(csv["score"]) == sorted(csv["score"], reverse=True)
    assert "| a | heuristic | 0.75" in capsys.readouterr().out
    assert main(["score", str(tmp_path / "nope")]) == 2


def test_a_tool_subset_is_scored_beside_the_reference_sweep_on_the_same_runs(sweep, tmp_path,
                                                                             capsys):
    from bugzoo.cli import main

    tool, tool_status = tmp_path / "tool", {"t": status(role="tool")}
    write(tool, "mlp-double_softmax", 0, [("t", 5, "s", "loss", "")], tool_status,
          bug="double_softmax", category="loss")
    write(tool, "mlp-clean", 0, [], tool_status)
    assert main(["score", str(tool / "sw"), "--beside", str(sweep)]) == 0
    table = pd.read_csv(tool / "sw" / "outcomes.csv")
    # the reference's detectors come in on the tool's two runs only, the tool's rows stay its own
    assert set(map(tuple, table[["detector", "scenario"]].values)) >= {
        ("t", "mlp-double_softmax"), ("a", "mlp-double_softmax"), ("a", "mlp-clean"),
        ("b", "mlp-clean")}
    assert set(table["scenario"]) == {"mlp-double_softmax", "mlp-clean"}
    board = pd.read_csv(tool / "sw" / "leaderboard.csv").set_index("detector")
    assert board.loc["t", "score"] == 1.0 and board.loc["a", "score"] == 0.0  # a: hit + FA
    assert f"--beside {sweep}" in capsys.readouterr().out
    assert main(["score", str(tool / "sw"), "--beside", str(tmp_path / "nope")]) == 2


def test_baselines_score_about_zero_on_the_quick_sweep(tmp_path):
    """On a real sweep: the three baselines score 0 within their intervals, and a constant
    alarm exactly 0, so a scoring change that lets a constant detector win fails here."""
    out = tmp_path / "quick"
    done = subprocess.run(
        [sys.executable, "-m", "bugzoo.cli", "bench", "--quick", "--out", str(out),
         "--no-progress", "--no-overhead", "--detectors", "baselines", "nonfinite",
         "ce_probabilities"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    board = pd.read_csv(out / "leaderboard.csv").set_index("detector")
    for baseline in ("always_alarm", "never_alarm", "random_alarm"):
        row = board.loc[baseline]
        assert row["score_lo"] <= 0.0 <= row["score_hi"] and abs(row["score"]) <= 0.25, row
        assert row["role"] == "baseline"
    assert board.loc["always_alarm", "score"] == 0.0 and board.loc["never_alarm", "score"] == 0.0
    assert board.loc["always_alarm", "recall"] == 1.0  # it "catches" every bug...
    assert board.loc["always_alarm", "false_alarm_rate"] == 1.0  # ...at the price of them all
    assert board.loc["suite: built-ins", "score"] > board.loc["always_alarm", "score"]


def test_delay_after_symptom_counts_from_the_first_nonfinite_step():
    summary = {"scenario": "mlp-log_of_zero", "seed": 0, "bug": "log_of_zero",
               "category": "numerics", "onset": 0, "first_nonfinite_step": 7,
               "detectors": {"a": status(), "b": status()}}
    alarms = pd.DataFrame([("a", 9, "s", "numerics", ""), ("b", 3, "s", "numerics", "")],
                          columns=store.ALARM_COLUMNS)
    rows = {r["detector"]: r for r in scoring.judge_run(summary, alarms, pd.Series(dtype=float))}
    assert (rows["a"]["delay_steps"], rows["a"]["delay_after_symptom_steps"]) == (9, 2)
    assert rows["b"]["delay_after_symptom_steps"] == -4  # alarmed before the loss went NaN
    quiet = scoring.judge_run(summary | {"first_nonfinite_step": None}, alarms,
                              pd.Series(dtype=float))
    assert all(r["delay_after_symptom_steps"] is None for r in quiet)
