"""Integrity: every strategy that detects nothing scores about 0 on the test split, because each
buggy run is held against its disarmed twin, which looks the same from inside the process."""

from __future__ import annotations

import copy
import functools
import os
import subprocess
import sys

import faults
import pandas as pd
import pytest
from conftest import quick_cfg, trace_only

from bugzoo.bugs import list_bugs
from bugzoo.harness.runner import execute
from bugzoo.judge.bugcheck import plant_evidence
from bugzoo.scenarios import list_scenarios
from bugzoo.train import Trainer

CHEATS = ("always_alarm", "never_alarm", "random_alarm", "settings_reader", "trace_memoriser",
          "label_peeker")
BUGS = [b for b in list_bugs() if not b.needs_cuda]


SHORT = ("harness.steps=12", "harness.eval_interval=6")


def short_cfg(scenario_id: str):
    """A short run of the scenario, for comparing its trace (:func:`conftest.trace_only`)."""
    return trace_only(quick_cfg(f"scenario={scenario_id}", *SHORT))


@functools.cache
def control_summary(scenario_id: str) -> dict:
    """A control's short run, once per process: many bugs share a control."""
    return execute(short_cfg(scenario_id)).summary


# models from the quickest to build, train and evaluate to the slowest (the language model's
# generation check continues every validation sentence)
QUICKEST_FIRST = ("mlp", "transformer", "lstm", "resnet", "gpt")


def quickest_scenario(bug):
    """One scenario of the bug (the twin's test is one per bug), on the quickest model that
    hosts it (a model not ranked here, last)."""
    def rank(scenario) -> int:
        return (QUICKEST_FIRST.index(scenario.model) if scenario.model in QUICKEST_FIRST
                else len(QUICKEST_FIRST))
    return min((s for s in list_scenarios() if s.bug == bug.id and not s.excluded), key=rank)


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_a_disarmed_twin_trains_as_its_control(bug):
    """The matched control is the clean run, bitwise, whatever the plant left installed; and a
    bug declared ``patches_only`` leaves its twin the same patches, with the same code."""
    scenario = quickest_scenario(bug)
    cfg = short_cfg(scenario.id)
    run = execute(copy.deepcopy(cfg), armed=False)
    twin, control = run.summary, control_summary(scenario.control)
    assert (twin["trace_digest"], twin["outcome"]) == (control["trace_digest"],
                                                       control["outcome"])
    assert twin["role"] == "control" and twin["bug"] == bug.id
    if bug.patches_only:  # the twin's trainer as the run left it (a run on several ranks
        # keeps none: then a fresh one) beside a fresh buggy one
        twin_trainer = run.trainer or Trainer(cfg, bug, armed=False).build()
        evidence = plant_evidence(Trainer(cfg, bug).build())
        assert plant_evidence(twin_trainer) == evidence
        # the walk reaches the plant (a distributed bug plants on its ranks only), so the
        # comparison is not two empty lists
        assert evidence["patches"] or bug.category == "distributed", evidence


@pytest.fixture(scope="module")
def test_split(tmp_path_factory):
    """A small test split on the mlp's defaults (its runs take seconds), watched by every
    strategy that detects nothing and by two real detectors. (A bug planted in the settings,
    such as lr_too_high, moves what settings_reader reads: there it is not a strategy that
    detects nothing, so it is left out here.)"""
    out = tmp_path_factory.mktemp("test-split") / "sweep"
    site = faults.install(tmp_path_factory.mktemp("site"))  # the test-only label_peeker
    done = subprocess.run(
        [sys.executable, "-m", "bugzoo.cli", "bench", "--split", "test", "--scenarios",
         "mlp-double_softmax", "mlp-missing_zero_grad", "mlp-labels_misaligned", "mlp-clean-wide",
         "mlp-clean-batch128", "--detectors", "baselines", "label_peeker", "nonfinite",
         "loss_plateau",
         "--out", str(out), "--no-progress", "--no-overhead", "--workers", "2"],
        capture_output=True, text=True, timeout=600, env=faults.env_with(site))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_every_strategy_that_detects_nothing_scores_about_zero(test_split):
    board = pd.read_csv(test_split / "leaderboard.csv").set_index("detector")
    assert set(CHEATS) < set(board.index), "`--detectors baselines` names every shipped one"
    for cheat in CHEATS:
        row = board.loc[cheat]
        assert abs(row["score"]) <= 0.1 and row["score_lo"] <= 0 <= row["score_hi"], row
    # a constant scores 0 exactly: it "catches" every bug and alarms on every twin
    assert board.loc["always_alarm", "score"] == board.loc["never_alarm", "score"] == 0.0
    assert board.loc["always_alarm", "matched_false_alarm_rate"] == 1.0
    # they are live: each would have "caught" bugs against unmatched clean runs
    for cheat in ("always_alarm", "settings_reader", "trace_memoriser", "label_peeker"):
        assert board.loc[cheat, "recall"] == 1.0, cheat
    assert board.loc["suite: built-ins", "score"] > 0.5


def test_the_test_split_draws_and_records_fresh_seeds(test_split, request):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # grouped with the fixture's other tests
        assert request.node.nodeid.endswith("@test_integrity:test_split"), request.node.nodeid
    split = pd.read_json(test_split / "split.json", typ="series")
    assert split["name"] == "test" and len(split["seeds"]) == 3
    assert not set(split["seeds"]) & {0, 1, 2, 3, 4}  # not the published dev seeds (2**31 draw)
    summaries = pd.read_csv(test_split / "outcomes.csv")
    assert set(summaries["seed"]) == set(split["seeds"])
    assert f"seeds {', '.join(map(str, split['seeds']))}" in (
        test_split / "leaderboard.md").read_text()


def test_bugzoo_check_turns_the_label_peeker_away(tmp_path):
    """The decoy bugs of ``check_blind`` are planted as real ones are: a detector that reads
    the planted bug's identity, through any of the routes, fails the conformance suite."""
    site = faults.install(tmp_path / "site")
    done = subprocess.run([sys.executable, "-m", "bugzoo.cli", "check", "label_peeker",
                           "--only", "check_blind"],
                          capture_output=True, text=True, timeout=600,
                          env=faults.env_with(site))
    assert done.returncode == 1 and "FAIL check_blind: peeking" in done.stderr


def test_the_release_is_frozen():
    """The code that decides a run is the code of the release as committed: a change to a
    scenario, a bug, a dataset or the shared loop needs a new release and a new manifest."""
    import json
    from pathlib import Path

    from bugzoo import release

    committed = json.loads((Path(__file__).resolve().parents[1] / release.MANIFEST).read_text())
    live = release.manifest()
    changed = sorted(sid for sid in live["scenarios"]
                     if live["scenarios"][sid] != committed["scenarios"].get(sid))
    assert not changed and live["shared"] == committed["shared"], (
        f"changed since {committed['release']} ({changed[:5]}, shared code "
        f"{'changed' if live['shared'] != committed['shared'] else 'same'}): make a new release "
        "(bugzoo results release, CHANGELOG.md)")
    assert live["digest"] == committed["digest"]


def test_the_published_traces_are_todays_and_the_board_names_its_release():
    """Every run of the published trace set holds today's key for its scenario: today's code
    made it (or made a run it stands for). Every published outcome carries one release
    digest, the release its runs were made by, which the board names; until a release remakes
    its board with a fresh test split, README says the board is the older release's."""
    import json
    import re
    from pathlib import Path

    import pandas as pd

    from bugzoo import release

    root = Path(__file__).resolve().parents[1]
    results = root / "results"
    committed = json.loads((results / release.MANIFEST.name).read_text())
    runs = pd.read_parquet(results / "traces" / "runs.parquet")
    assert (runs["key"] == runs["scenario"].map(release.scenario_key)).all()
    (digest,) = set(pd.read_parquet(results / "outcomes.parquet")["release"])
    named = re.search(rf"(bugzoo-bench [\d.]+) \(digest {digest}\)",
                      (results / "leaderboard.md").read_text())
    assert named, "the board does not name the release of its runs"
    if digest != committed["digest"]:
        readme = " ".join((root / "README.md").read_text().split())
        assert f"This board is {named.group(1)}'s" in readme


@pytest.mark.slow
def test_the_trace_memoriser_wins_on_the_published_dev_traces_only():
    """On the dev split's published traces it "detects" the bugs, since every clean trace is
    one it has seen: the reason a citable board comes from the test split, where it scores 0
    (test_every_strategy_that_detects_nothing_scores_about_zero)."""
    from pathlib import Path

    from bugzoo.harness.traceset import stored_runs
    from bugzoo.judge.scoring import leaderboard
    from bugzoo.judge.sealed import sealed_outcomes

    traces = Path(__file__).resolve().parents[1] / "results" / "traces"
    # one seed of a dozen of the mlp's bugs and its clean runs: every job reads the whole trace
    # set, so more runs add time and nothing the claim needs
    mlp = [r for r in stored_runs(traces)
           if r.summary["model"] == "mlp" and r.summary["seed"] == 0]
    chosen = sorted({r.summary["bug"] for r in mlp if r.summary["bug"]})[:12]
    runs = [r for r in mlp if not r.summary["bug"] or r.summary["bug"] in chosen]
    board = leaderboard(sealed_outcomes(runs, ["trace_memoriser"], hidden=[]))
    board = board.set_index("detector")
    assert board.loc["trace_memoriser", "score"] > 0.5


def test_the_published_board_is_its_published_outcomes_scored():
    """`results/leaderboard.csv` and `results/leaderboard.md` are what the scoring code and
    its template make of the committed per-run outcomes and overhead: anyone can recompute the
    citable board, and no figure on it was typed. The page's command and stamp are what it
    says (the sweep folder that holds them is not committed). Lite's page is not held to it:
    it was scored by 1.6, before ``suite: sealed``."""
    import io
    import re
    from pathlib import Path

    from bugzoo.judge import scoring
    from bugzoo.judge.scoring import OVERHEAD_FILE, PUBLISHED_OUTCOMES, board_inputs, leaderboard

    results = Path(__file__).resolve().parents[1] / "results"
    outcomes = pd.read_parquet(results / PUBLISHED_OUTCOMES)
    table, runs, decoys = board_inputs(outcomes)
    board = leaderboard(runs, pd.read_csv(results / OVERHEAD_FILE), decoys=decoys)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(board.to_csv(index=False))),
                                  pd.read_csv(results / "leaderboard.csv"))
    page = (results / "leaderboard.md").read_text()
    command, stamp = re.search(r"Regenerate with `(.*?)`\. (Runs made .*?\))\. Silent",
                               page.splitlines()[2]).groups()
    assert scoring.render(board, *(scoring.apart_board(runs, kind) for kind in
                                   scoring.APART_KINDS), scoring.unproven_effects(table),
                          scoring.category_board(runs), command, stamp) == page
    split = pd.read_json(results / "split.json", typ="series")
    assert split["name"] == "test" and set(outcomes["seed"]) == set(split["seeds"])
