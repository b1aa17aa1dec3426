"""Benchmark validity: the statistics, a quick end-to-end validation, and no regression."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.config import compose_run
from bugzoo.harness.runner import execute
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge.validity import ALPHA, HEALTH_MARGIN, compare
from bugzoo.scenarios import list_scenarios

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


@pytest.mark.skipif(not (ROOT / "results" / "health.csv").is_file(),
                    reason="results/health.csv not generated yet")
def test_committed_health_covers_every_clean_scenario_and_each_variant_is_healthy():
    table = pd.read_csv(ROOT / "results" / "health.csv").set_index("scenario")
    clean = {s.id: s for s in list_scenarios() if s.clean}
    missing = sorted(set(clean) - set(table.index))
    assert not missing, f"not measured yet (run bugzoo validate): {missing}"
    controls = {s.control for s in list_scenarios() if s.control}
    for sid in clean:
        assert table.loc[sid, "role"] == ("control" if sid in controls else "variant"), sid
    variants = table[table["role"] == "variant"]
    assert len(variants) >= 25 and (variants["seeds"] >= 3).all()
    sick = variants[~variants["healthy"].astype(bool)]
    assert sick.empty, f"unhealthy variants: {list(sick.index)}"
    assert (variants["min_val_acc"] >= variants["default_val_acc"] - HEALTH_MARGIN).all()


MLP_VARIANTS = [s for s in list_scenarios() if s.clean and s.model == "mlp" and s.settings
                and s.id not in {t.control for t in list_scenarios()}
                and s.world_size == 1]


@pytest.mark.parametrize("scenario", MLP_VARIANTS, ids=[s.id for s in MLP_VARIANTS])
def test_an_mlp_variant_trains_as_well_as_the_default(scenario, default_mlp_accuracy):
    """Live, on one seed: each healthy mlp variant (the cheap model) ends within the margin."""
    accuracy = execute(compose_run([f"scenario={scenario.id}"])).summary["final_val_acc"]
    assert accuracy >= default_mlp_accuracy - HEALTH_MARGIN


@pytest.fixture(scope="module")
def default_mlp_accuracy() -> float:
    return execute(compose_run(["scenario=mlp-clean"])).summary["final_val_acc"]
