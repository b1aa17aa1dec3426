"""Scoring: outcome classes, a paired score that rewards discrimination only, intervals over
bugs, suites, releases, and the tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bugzoo.harness import store
from bugzoo.judge import outcomes, scoring
from bugzoo.judge.stats import bootstrap, clopper_pearson, upper_bound
from bugzoo.registry import OWN_DISTRIBUTION

STEPS = 300


def status(role="heuristic", distribution=OWN_DISTRIBUTION, scope="generic"):
    return {"error": None, "seconds": 0.0, "call_share": 0.0, "alarms": 0, "role": role,
            "scope": scope, "distribution": distribution, "version": "1.0.0"}


def write(root, scenario, seed, alarms, detectors, bug=None, category=None, onset=0,
          loud=False, model="mlp", unproven=False, role=None, release="r1", symptom=None,
          steps=STEPS, key=None):
    """Store one run of ``steps`` steps; a buggy one (``bug``) is buggy unless
    ``role="control"`` (its twin)."""
    trace = pd.DataFrame({"step": range(steps), "loss": 1.0,
                          "elapsed_s": [0.5 * (i + 1) for i in range(steps)]})
    role = role or ("buggy" if bug else "clean")
    summary = {"scenario": scenario, "seed": seed, "model": model, "bug": bug, "role": role,
               "category": category, "onset": onset if bug else None, "loud": loud,
               "unproven": unproven, "outcome": "completed", "detectors": detectors,
               "release": release, "symptom_value": symptom, "steps_completed": steps}
    if key is not None:
        summary["key"] = key
    frame = pd.DataFrame(alarms, columns=store.ALARM_COLUMNS)
    name = store.run_dir(root, "sw", scenario, seed)
    if role == "control":
        name = name.with_name(f"{name.name}.{store.CONTROL_TAG}")
    store.write_run(name, {}, trace, frame, summary)


def pair(root, scenario, seed, buggy_alarms, control_alarms, detectors, **bug):
    """A buggy run and its disarmed twin."""
    write(root, scenario, seed, buggy_alarms, detectors, **bug)
    write(root, scenario, seed, control_alarms, detectors, role="control", **bug)


@pytest.fixture
def sweep(tmp_path):
    """Detectors a and b (built-ins) on pairs of buggy and control runs and healthy runs."""
    root, both = tmp_path / "runs", {"a": status(), "b": status()}
    lr = {"bug": "lr_too_high", "category": "optim", "onset": 4}
    # onset 4: a hits at step 6 with the right category, its twin quiet; b alarms early at step
    # 2 on both runs (they are one and the same before the onset)
    pair(root, "mlp-lr_too_high", 0, [("a", 6, "s", "optim", ""), ("a", 8, "s", "loss", ""),
                                      ("b", 2, "s", "optim", "")],
         [("b", 2, "s", "optim", "")], both, **lr)
    ds = {"bug": "double_softmax", "category": "loss"}
    # onset 0: a hits at 3 with a wrong category, and alarms on the twin too; b misses
    pair(root, "mlp-double_softmax", 0, [("a", 3, "s", "optim", "")], [("a", 9, "s", "s", "")],
         both, **ds)
    pair(root, "mlp-double_softmax", 1, [("a", 3, "s", "loss", "")], [], both, **ds)
    # healthy variants: a raises a false alarm on one of two runs
    write(root, "mlp-clean-lr_x0p3", 0, [("a", 1, "s", "optim", "")], both)
    write(root, "mlp-clean-batch128", 0, [], both)
    # loud and unproven bugs: scored apart
    pair(root, "mlp-crash", 0, [("b", 0, "s", "numerics", "")], [], both, bug="crash",
         category="numerics", loud=True)
    pair(root, "mlp-quiet_bug", 0, [("a", 2, "s", "loop", "")], [], both, bug="quiet_bug",
         category="loop", unproven=True, symptom=0.5)
    return root / "sw"


def test_outcomes_classify_each_detector_run(sweep):
    t = outcomes.outcomes(sweep).set_index(["detector", "scenario", "seed", "run_role"])
    lr = ("mlp-lr_too_high", 0)
    assert t.loc[("a", *lr, "buggy"), "outcome"] == "hit"
    assert t.loc[("a", *lr, "buggy"), "delay_steps"] == 2
    # onset 4 begins at elapsed 2.0 s (end of step 3); the alarm step 6 ends at 3.5 s
    assert t.loc[("a", *lr, "buggy"), "delay_s"] == pytest.approx(1.5)
    assert t.loc[("a", *lr, "buggy"), "diagnosed"] == True  # noqa: E712
    assert t.loc[("a", *lr, "control"), "outcome"] == "quiet"
    assert t.loc[("b", *lr, "buggy"), "outcome"] == "early"
    assert t.loc[("b", *lr, "control"), "outcome"] == "early"
    assert t.loc[("a", "mlp-double_softmax", 0, "control"), "outcome"] == "false_alarm"
    assert t.loc[("b", "mlp-double_softmax", 0, "buggy"), "outcome"] == "miss"
    assert t.loc[("a", "mlp-clean-lr_x0p3", 0, "clean"), "outcome"] == "false_alarm"


def test_the_paired_score_is_macro_averaged_over_bugs(sweep):
    table = outcomes.outcomes(sweep)
    board = scoring.leaderboard(table).set_index("detector")
    a, b = board.loc["a"], board.loc["b"]
    # lr_too_high: one pair, hit and a quiet twin: 1. double_softmax: (1 - 1) and (1 - 0): 0.5
    assert a["score"] == pytest.approx((1.0 + 0.5) / 2)
    assert (a["bugs"], a["pairs"], a["hits"], a["control_alarms"]) == (2, 3, 3, 1)
    assert a["recall"] == 1.0 and a["matched_false_alarm_rate"] == pytest.approx(0.25)
    assert a["healthy_false_alarm_rate"] == 0.5 and a["flag"]  # over 0.05: flagged
    assert a["median_delay_steps"] == 3 and a["median_delay_steps_midrun"] == 2
    assert a["diagnosis_accuracy"] == pytest.approx((1.0 + 0.5) / 2)  # per bug, then mean
    # b: early on lr_too_high (scores nothing either way), missed double_softmax
    assert (b["early"], b["hits"], b["misses"], b["score"]) == (1, 0, 2, 0.0)
    assert b["healthy_false_alarm_rate"] == 0.0 and not b["flag"]
    # every cluster at 0: the exact interval over the clean scenarios, not a bootstrap's [0, 0]
    assert b["healthy_false_alarm_rate_hi"] == pytest.approx(clopper_pearson(0, 2)[2])
    loud = scoring.apart_board(table, "loud").set_index("detector")
    assert loud.loc["b", "runs"] == 1 and loud.loc["b", "recall"] == 1.0
    assert loud.loc["a", "recall"] == 0.0
    unproven = scoring.apart_board(table, "unproven").set_index("detector")
    assert unproven.loc["a", "recall"] == 1.0 and unproven.loc["b", "recall"] == 0.0
    assert set(scoring.category_board(table)["category"]) == {"optim", "loss"}


def constant_detector_sweep(root, alarm_at):
    """Every run watched by one detector that alarms at step ``alarm_at`` (None: never), on
    healthy runs and pairs with onsets 0, 50 and 150."""
    watch = {"d": status()}
    alarm = [] if alarm_at is None else [("d", alarm_at, "s", "unknown", "")]
    for seed in range(3):
        for scenario in ("mlp-clean-batch128", "lstm-clean-lr_x3"):
            write(root, scenario, seed, alarm, watch)
        for scenario, onset in (("mlp-double_softmax", 0), ("mlp-frozen_layers", 50),
                                ("mlp-no_clipping_spike", 150)):
            pair(root, scenario, seed, alarm, alarm, watch, bug=scenario[4:], category="loss",
                 onset=onset)
    return root / "sw"


@pytest.mark.parametrize("alarm_at", [None, 0, 1, 49, 50, 120, 150, 299])
def test_a_detector_that_ignores_the_run_scores_exactly_zero(tmp_path, alarm_at):
    """An alarm at a fixed step tells nothing about the bug, whatever the step: it comes on the
    twin as on the buggy run, and the paired score is 0 with an interval of [0, 0]."""
    board = scoring.leaderboard(outcomes.outcomes(constant_detector_sweep(tmp_path, alarm_at)))
    row = board.set_index("detector").loc["d"]
    assert (row["score"], row["score_lo"], row["score_hi"]) == (0.0, 0.0, 0.0)


def test_a_control_alarm_counts_only_where_its_buggy_run_still_ran(tmp_path):
    """A buggy run that crashes or diverges at step 50 ends there; its twin trains on, and an
    alarm after step 50 has no counterpart to be told apart from, so it is no control alarm
    (alarms at random steps would otherwise score below 0). Before step 50 it is one."""
    root, watch = tmp_path / "runs", {"d": status()}
    for seed, at in ((0, 120), (1, 40)):
        write(root, "mlp-lr_too_high", seed, [], watch, bug="lr_too_high", category="optim",
              steps=50)
        write(root, "mlp-lr_too_high", seed, [("d", at, "s", "unknown", "")], watch,
              bug="lr_too_high", category="optim", role="control")
    paired = scoring.pairs(outcomes.outcomes(root / "sw")).set_index("seed")
    assert list(paired["control_outcome"]) == ["false_alarm", "false_alarm"]
    assert (paired.loc[0, "control_alarm"], paired.loc[1, "control_alarm"]) == (0, 1)


def test_a_detector_that_sees_the_bug_scores_high(tmp_path):
    root, watch = tmp_path / "runs", {"d": status()}
    for seed in range(4):
        write(root, "mlp-clean-batch128", seed, [], watch)
        pair(root, "mlp-frozen_layers", seed, [("d", 52, "s", "optim", "")], [], watch,
             bug="frozen_layers", category="optim", onset=50)
    row = scoring.leaderboard(outcomes.outcomes(root / "sw")).set_index("detector").loc["d"]
    assert row["score"] == 1.0 and row["recall"] == 1.0
    assert row["healthy_false_alarm_rate"] == 0.0
    assert row["median_delay_steps_midrun"] == 2 and math.isnan(row["median_delay_steps"])


def test_intervals_resample_bugs_not_runs(tmp_path):
    """Many runs of one bug do not narrow the interval: a bug counts once."""
    root, watch = tmp_path / "runs", {"d": status()}
    for seed in range(20):  # one bug caught in every run ...
        pair(root, "mlp-frozen_layers", seed, [("d", 0, "s", "optim", "")], [], watch,
             bug="frozen_layers", category="optim")
    for bug in ("double_softmax", "lr_too_high"):  # ... two bugs never caught
        pair(root, f"mlp-{bug}", 0, [], [], watch, bug=bug, category="loss")
    row = scoring.leaderboard(outcomes.outcomes(root / "sw")).set_index("detector").loc["d"]
    assert row["score"] == pytest.approx(1 / 3) and row["recall_runs"] == pytest.approx(20 / 22)
    assert row["score_lo"] == 0.0 and row["score_hi"] == 1.0


def test_cluster_intervals():
    value, lo, hi = scoring.cluster_interval(np.array([0.0, 0.0, 0.0, 0.0]), rate=True)
    assert (value, lo) == (0.0, 0.0) and hi == pytest.approx(clopper_pearson(0, 4)[2])
    value, lo, hi = scoring.cluster_interval(np.array([0.0, 0.5, 1.0, 1.0]))
    assert lo < value < hi and value == 0.625
    assert all(math.isnan(v) for v in scoring.cluster_interval(np.array([])))
    median, lo, hi = scoring.pooled_interval([np.array([1.0, 2.0]), np.array([10.0])])
    assert median == 2.0 and lo <= median <= hi


def test_suites_take_the_first_alarm_and_call_a_split_diagnosis_ambiguous(tmp_path):
    root = tmp_path / "runs"
    watch = {"loud": status(), "quiet": status(), "picky": status(scope="targeted"),
             "tool": status(role="tool"), "base": status(role="baseline"),
             "theirs": status(distribution="their-tools")}
    # two members alarm first at step 5, naming different causes
    pair(root, "mlp-double_softmax", 0, [("loud", 5, "s", "optim", ""),
                                         ("quiet", 5, "s", "loss", ""),
                                         ("picky", 7, "s", "loss", ""),
                                         ("base", 0, "s", "unknown", ""),
                                         ("theirs", 0, "s", "unknown", "")],
         [("loud", 9, "s", "optim", ""), ("base", 0, "s", "unknown", "")], watch,
         bug="double_softmax", category="loss")
    table = outcomes.with_suites(outcomes.outcomes(root / "sw"))
    pd.testing.assert_frame_equal(outcomes.with_suites(table), table)  # formed once, not twice
    suite = table[table["detector"] == "suite: built-ins"].set_index("run_role")
    assert suite.loc["buggy", "alarm_category"] == outcomes.AMBIGUOUS
    assert suite.loc["buggy", "diagnosed"] == False  # noqa: E712
    assert suite.loc["buggy", "outcome"] == "hit"  # the baseline's step 0 ignored
    assert suite.loc["control", "outcome"] == "false_alarm"
    identities = {d: (s["role"], s["scope"], s["distribution"], d in ("picky", "quiet"))
                  for d, s in watch.items()}  # picky and quiet scored sealed
    assert outcomes.form_suites(identities) == {
        "suite: built-ins": ["loud", "picky", "quiet"], "suite: sealed": ["picky", "quiet"],
        "suite: generic": ["loud", "quiet"],
        "suite: built-ins + tools": ["loud", "picky", "quiet", "tool"]}
    # the same from the rows: a suite of the rows scored sealed, which alarms at picky's step
    rows = outcomes.outcomes(root / "sw")
    rows["scored"] = rows["detector"].map(
        lambda d: outcomes.sealed_label("namespaces") if d in ("picky", "quiet")
        else outcomes.IN_PROCESS)
    sealed = outcomes.with_suites(rows).query("detector == 'suite: sealed'").set_index("run_role")
    assert sealed.loc["buggy", "alarm_step"] == 5 and sealed.loc["buggy", "scored"] == (
        "sealed (namespaces)")
    assert sealed.loc["control", "outcome"] != "false_alarm"  # loud alarmed there, not them


def test_one_scenarios_runs_made_by_different_code_are_not_scored_together(sweep, capsys):
    """A scenario's runs must come from one code (their keys; the release digest for runs
    stored without keys); other scenarios' runs may come from other code, as a trace set
    completed release by release holds them."""
    from bugzoo.cli import main

    write(sweep.parent, "mlp-clean-lr_x3", 0, [], {"a": status()}, release="r2")
    assert main(["score", str(sweep)]) == 0  # another scenario, another release: fine
    capsys.readouterr()
    write(sweep.parent, "mlp-double_softmax", 1, [], {"a": status(), "b": status()},
          bug="double_softmax", category="loss", role="control", release="r2")
    assert main(["score", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "runs of mlp-double_softmax" in err and "made by different code" in err
    assert "release r1, release r2" in err


def test_runs_of_one_scenario_with_different_keys_are_not_scored_together(tmp_path, capsys):
    from bugzoo.errors import UsageError
    from bugzoo.judge.outcomes import outcomes

    root, watch = tmp_path / "runs", {"a": status()}
    for seed, key in enumerate(["k1", "k1"]):
        write(root, "mlp-clean-lr_x3", seed, [], watch, key=key)
    assert len(outcomes(root / "sw")) == 2
    write(root, "mlp-clean-lr_x3", 2, [], watch, key="k2")
    with pytest.raises(UsageError, match="made by different code \\(k1, k2\\)"):
        outcomes(root / "sw")


def test_unproven_scenarios_show_their_paired_effect(tmp_path):
    root, watch = tmp_path / "runs", {"d": status()}
    for seed, (buggy, control) in enumerate([(0.9, 0.5), (0.7, 0.6), (0.8, 0.5)]):
        write(root, "mlp-quiet_bug", seed, [], watch, bug="quiet_bug", category="loop",
              unproven=True, symptom=buggy)
        write(root, "mlp-quiet_bug", seed, [], watch, bug="quiet_bug", category="loop",
              unproven=True, symptom=control, role="control")
    effects = scoring.unproven_effects(outcomes.outcomes(root / "sw")).set_index("scenario")
    row = effects.loc["mlp-quiet_bug"]
    assert row["seeds"] == 3 and row["effect"] == pytest.approx(0.3)
    assert row["effect_lo"] <= row["effect"] <= row["effect_hi"]


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
        assert {"detector", "bugs", "pairs", "clean_runs", "recall", "score",
                "matched_false_alarm_rate", "healthy_false_alarm_rate", "median_delay_steps",
                "overhead", "role", "scope", "source"} <= set(csv.columns)
        assert set(csv["detector"]) == {"a", "b", "suite: built-ins"}
        assert list(csv["score"]) == sorted(csv["score"], reverse=True)
    assert "| a | heuristic | in-process (trusted) | 0.75" in capsys.readouterr().out
    assert main(["score", str(tmp_path / "nope")]) == 2


def test_a_tool_subset_is_scored_beside_the_reference_sweep_on_the_same_runs(sweep, tmp_path,
                                                                             capsys):
    from bugzoo.cli import main

    tool, tool_status = tmp_path / "tool", {"t": status(role="tool")}
    pair(tool, "mlp-double_softmax", 0, [("t", 5, "s", "loss", "")], [], tool_status,
         bug="double_softmax", category="loss")
    write(tool, "mlp-clean-batch128", 0, [], tool_status)
    assert main(["score", str(tool / "sw"), "--beside", str(sweep)]) == 0
    table = pd.read_csv(tool / "sw" / "outcomes.csv")
    # the reference's detectors come in on the tool's runs only, the tool's rows stay its own
    assert set(map(tuple, table[["detector", "scenario", "run_role"]].values)) >= {
        ("t", "mlp-double_softmax", "buggy"), ("a", "mlp-double_softmax", "buggy"),
        ("a", "mlp-double_softmax", "control"), ("b", "mlp-clean-batch128", "clean")}
    assert set(table["scenario"]) == {"mlp-double_softmax", "mlp-clean-batch128"}
    board = pd.read_csv(tool / "sw" / "leaderboard.csv").set_index("detector")
    assert board.loc["t", "score"] == 1.0 and board.loc["a", "score"] == 0.0  # a: hit + FA
    assert f"--beside {sweep}" in capsys.readouterr().out
    assert main(["score", str(tool / "sw"), "--beside", str(tmp_path / "nope")]) == 2


def test_delay_after_symptom_counts_from_the_first_nonfinite_step():
    summary = {"scenario": "mlp-log_of_zero", "seed": 0, "bug": "log_of_zero",
               "category": "numerics", "onset": 0, "first_nonfinite_step": 7,
               "detectors": {"a": status(), "b": status()}}
    alarms = pd.DataFrame([("a", 9, "s", "numerics", ""), ("b", 3, "s", "numerics", "")],
                          columns=store.ALARM_COLUMNS)
    rows = {r["detector"]: r for r in outcomes.judge_run(summary, alarms,
                                                         pd.Series(dtype=float))}
    assert (rows["a"]["delay_steps"], rows["a"]["delay_after_symptom_steps"]) == (9, 2)
    assert rows["b"]["delay_after_symptom_steps"] == -4  # alarmed before the loss went NaN
    quiet = outcomes.judge_run(summary | {"first_nonfinite_step": None}, alarms,
                               pd.Series(dtype=float))
    assert all(r["delay_after_symptom_steps"] is None for r in quiet)


def test_a_symptom_value_is_a_number_whatever_run_comes_first(tmp_path):
    """An event's symptom (a NaN, a crash) counts as 1 or 0, so a table whose first run holds
    one still stores the metrics of the runs after it."""
    rows = [r for value in (True, 2.37, None) for r in outcomes.judge_run(
        {"scenario": "mlp-double_softmax", "seed": 0, "bug": "double_softmax",
         "category": "loss", "onset": 0, "symptom_value": value,
         "detectors": {"a": status()}}, pd.DataFrame(columns=store.ALARM_COLUMNS),
        pd.Series(dtype=float))]
    assert [r["symptom_value"] for r in rows] == [1.0, 2.37, None]
    pd.DataFrame(rows).to_parquet(tmp_path / "outcomes.parquet")  # one type: it writes


def test_publish_writes_where_it_is_told(sweep, tmp_path, monkeypatch):
    from bugzoo.cli import main

    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere" / "board"
    assert main(["score", str(sweep), "--publish", str(target)]) == 0
    assert f"--publish {target}" in (target / "leaderboard.md").read_text()
    assert (target / "outcomes.parquet").is_file() and not (tmp_path / "results").exists()
    (tmp_path / "a_file").write_text("kept")
    assert main(["score", str(sweep), "--publish", str(tmp_path / "a_file")]) == 2
    assert (tmp_path / "a_file").read_text() == "kept"


def test_an_unproven_mark_takes_effect_when_a_sweep_is_scored_again(tmp_path, monkeypatch):
    """Runs record whether their scenario was unproven; a mark added to (or taken off) the
    scenario file after the sweep wins when the sweep is scored again."""
    from dataclasses import replace

    from bugzoo.scenarios import get_scenario

    root, watch = tmp_path / "runs", {"d": status()}
    for role in ("buggy", "control"):
        write(root, "mlp-double_softmax", 0, [], watch, bug="double_softmax", category="loss",
              role=role, unproven=True)  # recorded so, and since taken off the file
    marked = replace(get_scenario("mlp-double_softmax"), unproven="measured: no effect")
    assert not outcomes.outcomes(root / "sw")["unproven"].any()  # the file as it is today
    monkeypatch.setattr(outcomes, "registry", lambda: {"mlp-double_softmax": marked})
    assert outcomes.outcomes(root / "sw")["unproven"].all()
