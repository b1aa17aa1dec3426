"""Benchmark validity: the statistics, a quick end-to-end validation, and no regression."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge.validity import ALPHA, compare

ROOT = Path(__file__).resolve().parents[1]


def test_metric_test_needs_full_separation_over_five_seeds():
    p, effect = compare("final_val_acc", "lower", [0.5, 0.6, 0.55, 0.52, 0.58],
                        [0.9, 0.91, 0.92, 0.89, 0.93])
    assert p < ALPHA and effect < 0
    p, _ = compare("final_val_acc", "lower", [0.9, 0.6, 0.55, 0.92, 0.58],
                   [0.9, 0.91, 0.92, 0.89, 0.93])
    assert p > ALPHA


def test_event_test_and_missing_values():
    p, effect = compare("nonfinite", "event", [True] * 5, [False] * 5)
    assert p < ALPHA and effect == 1.0
    assert compare("nonfinite", "event", [True, False] * 2 + [False], [False] * 5)[0] > ALPHA
    # a run that crashed before any evaluation counts as the worst outcome
    p, _ = compare("final_val_acc", "lower", [None] * 5, [0.9] * 5)
    assert p < ALPHA


def test_quick_validation_end_to_end(tmp_path):
    code = main(["validate", "--scenarios", "mlp-double_softmax", "mlp-frozen_from_start",
                 "--seeds", "0,1,2,3,4", "--runs", str(tmp_path / "runs"), "--out",
                 str(tmp_path), "--no-progress", "harness.steps=80", "harness.eval_interval=40"])
    assert code == 0
    table = pd.read_csv(tmp_path / "validity.csv")
    assert {"scenario", "bug", "model", "valid", "p_value", "effect"} <= set(table.columns)
    assert table.set_index("scenario").valid.to_dict() == {
        "mlp-double_softmax": True, "mlp-frozen_from_start": True}
    assert "bugzoo validate" in (tmp_path / "validity.md").read_text()


@pytest.mark.skipif(not (ROOT / "results" / "validity.csv").is_file(),
                    reason="results/validity.csv not generated yet")
def test_committed_validity_covers_every_default_scenario():
    """Every scenario of the default sweep was validated and manifests; none regressed."""
    table = pd.read_csv(ROOT / "results" / "validity.csv").set_index("scenario")
    buggy = [s.id for s in select_scenarios(None, device="cpu") if not s.clean]
    missing = sorted(set(buggy) - set(table.index))
    assert not missing, f"not validated yet (run bugzoo validate): {missing}"
    invalid = sorted(s for s in buggy if not table.loc[s, "valid"])
    assert not invalid, f"invalid scenarios still in the default sweep: {invalid}"
