"""Numerics and precision bugs manifest against clean runs; late onsets leave the start clean."""

from __future__ import annotations

import pandas as pd
import pytest
from manifests import check_manifests

from bugzoo.config import compose_run
from bugzoo.harness.runner import execute
from bugzoo.telemetry import TIMING_COLUMNS


@pytest.mark.parametrize(("scenario", "settings"), [
    ("mlp-log_of_zero", ["harness.steps=150", "harness.eval_interval=150"]),
    ("mlp-planted_log_layer", ["harness.steps=80", "harness.eval_interval=80"]),
    ("mlp-init_too_large", ["harness.steps=5", "harness.eval_interval=5"]),
    ("mlp-init_too_small", ["harness.steps=100", "harness.eval_interval=100"]),
    ("mlp-adam_eps_fp16", ["harness.steps=20", "harness.eval_interval=20"]),
    ("transformer-sqrt_at_zero", ["harness.steps=3", "harness.eval_interval=3"]),
])
def test_symptom(scenario, settings):
    result = check_manifests(scenario, [0, 2], settings)
    assert result.separates(), result


def test_planted_log_layer_is_clean_before_onset():
    cfg = ["scenario=mlp-planted_log_layer", "harness.steps=60"]
    buggy, clean = execute(compose_run(cfg)).trace, execute(compose_run([*cfg, "~bug"])).trace
    onset = 50
    drop = list(TIMING_COLUMNS)
    pd.testing.assert_frame_equal(buggy.drop(columns=drop).head(onset),
                                  clean.drop(columns=drop).head(onset))
    assert not buggy.drop(columns=drop).iloc[onset:].equals(clean.drop(columns=drop).iloc[onset:])


def test_adam_eps_fp16_representable_eps_stays_finite():
    summary = execute(compose_run(["scenario=mlp-adam_eps_fp16", "harness.steps=20",
                                   "bug.params.eps=1e-4"])).summary
    assert not summary["nonfinite"]


def test_sqrt_at_zero_forward_is_finite_gradient_is_not():
    trace = execute(compose_run(["scenario=transformer-sqrt_at_zero", "harness.steps=2"])).trace
    assert trace.loc[0, "loss"] == trace.loc[0, "loss"]  # finite forward at step 0
    assert trace.loc[0, "nonfinite_grads"] > 0
