"""bugzoo-bench Lite: its rule is deterministic and reads no run, the frozen selection is the
rule's, a plain bench sweeps it on a fresh test split, and its agreement with the full board
is what the committed page says; --quick prints a smoke test's few lines; the progress bar
counts cost."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from bugzoo.harness import store, sweep
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge import bench, lite

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def test_the_rule_reads_no_run_and_the_frozen_selection_is_its_own(monkeypatch):
    def no_runs(*args, **kwargs):
        raise AssertionError("the Lite rule read a stored run")

    for reader in ("read_summary", "read_trace", "read_alarms", "read_split"):
        monkeypatch.setattr(store, reader, no_runs)
    monkeypatch.setattr(pd, "read_parquet", no_runs)
    scenarios = select_scenarios(None, device="cpu", controls=False)
    chosen = lite.lite_selection(scenarios)
    assert chosen == lite.lite_selection(list(reversed(scenarios)))  # order does not matter
    frozen = json.loads((RESULTS / "lite.json").read_text())
    assert frozen["scenarios"] == chosen, "a new bug or scenario: `bugzoo lite --freeze`"
    assert frozen["rule"] == lite.RULE


def test_lite_has_one_proven_scenario_per_silent_bug_and_a_share_of_healthy_ones():
    from bugzoo.bugs import get_bug
    from bugzoo.scenarios import get_scenario

    scenarios = select_scenarios(None, device="cpu", controls=False)
    chosen = [get_scenario(i) for i in lite.frozen_ids()]
    silent = {s.bug for s in scenarios if not s.clean and not get_bug(s.bug).loud
              and not s.unproven}
    buggy = [s for s in chosen if not s.clean]
    assert sorted(s.bug for s in buggy) == sorted(silent)  # each once
    assert not any(s.unproven for s in buggy)
    healthy = [s.id for s in chosen if s.clean]
    assert healthy == sorted(s.id for s in scenarios if s.clean)[::lite.HEALTHY_EVERY]
    per_model = pd.Series([s.model for s in buggy]).value_counts()
    assert per_model.max() - per_model.min() <= 3, per_model  # stratified by model


def test_a_plain_bench_plans_lite_on_a_fresh_test_split(tmp_path, monkeypatch):
    planned = {}

    def stop_at_the_plan(tasks, workers, progress):
        planned["tasks"] = tasks
        raise SystemExit(0)

    monkeypatch.setattr(bench, "sweep", stop_at_the_plan)
    with pytest.raises(SystemExit):
        bench.main(["--out", str(tmp_path / "lite"), "--no-progress", "--no-overhead"])
    tasks = planned["tasks"]
    split = store.read_split(tmp_path / "lite")
    assert split["name"] == "test" and split["board"] == "Lite" and len(split["seeds"]) == 1
    assert {t.scenario.id for t in tasks if not t.honeypot} == set(lite.frozen_ids())
    assert {t.seed for t in tasks} == set(split["seeds"])


def test_full_takes_no_selection(capsys):
    from bugzoo.cli import main

    assert main(["bench", "--full", "--scenarios", "mlp-*"]) == 2
    assert "--full is the whole test-split board: it takes no --scenarios" in capsys.readouterr().err


def test_the_committed_agreement_is_todays():
    """results/lite_agreement.csv is what `bugzoo lite --agreement` makes of the published
    outcomes and the frozen selection."""
    split = json.loads((RESULTS / "split.json").read_text())
    board, tau, n = lite.agreement(pd.read_parquet(RESULTS / "outcomes.parquet"),
                                   lite.frozen_ids(), split["seeds"][0])
    committed = pd.read_csv(RESULTS / "lite_agreement.csv")
    pd.testing.assert_frame_equal(board.reset_index(drop=True), committed, check_dtype=False)
    page = (RESULTS / "lite_agreement.md").read_text()
    assert f"over the {n} detectors and suites" in page and f"**{tau:.3f}**" in page


def test_quick_prints_a_smoke_test_of_few_lines_without_ranks(tmp_path):
    rows = [{"detector": f"d{i}", "scenario": f"mlp-b{j}", "seed": 0, "run_role": role,
             "outcome": "hit" if role == "buggy" else "false_alarm", "honeypot": False}
            for i in range(60) for j in range(3) for role in ("buggy", "control", "clean")]
    pd.DataFrame(rows).to_csv(tmp_path / "outcomes.csv", index=False)
    text = bench.smoke_summary(tmp_path)
    lines = text.splitlines()
    assert len(lines) <= bench.QUICK_LINES
    assert "smoke test: it cannot rank detectors" in lines[0]
    assert not re.search(r"rank(ed)? \d|rank \d+ of", text) and "score" not in text.lower()


def test_the_progress_bar_counts_cost_and_starts_from_what_is_done(tmp_path, monkeypatch):
    from bugzoo.harness.pool import RunTask
    from bugzoo.scenarios import get_scenario

    cheap, dear = get_scenario("mlp-clean"), get_scenario("resnet-clean")
    tasks = [RunTask(s, 0, (), (), str(tmp_path), False, 60.0) for s in (cheap, dear, dear)]
    bars = []

    class Bar:
        def __init__(self, total, initial, **kwargs):
            self.total, self.n = total, initial
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def set_postfix_str(self, text, refresh=False):
            self.postfix = text

        def update(self, n):
            self.n += n

    monkeypatch.setattr(sweep, "tqdm", Bar)
    monkeypatch.setattr(sweep, "resume_state",
                        lambda t: "done" if t is tasks[0] else "missing")
    monkeypatch.setattr(sweep, "run_tasks", lambda todo, workers: (
        {"scenario": t.scenario.id, "seed": 0, "outcome": "completed", "path": str(t.path)}
        for t in todo))
    sweep.sweep(tasks, 1)
    [bar] = bars
    expected = tasks[0].expected_cost + 2 * tasks[1].expected_cost
    assert bar.total == pytest.approx(expected, abs=0.2)  # seconds of expected cost, not runs
    assert bar.n == pytest.approx(expected, abs=0.2) and "3/3 runs" in bar.postfix
