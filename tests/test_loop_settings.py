"""Loop settings a practitioner's loop has and some bugs live in: early stopping, a restart
from a checkpoint, an evaluation before training. Off by default, they change nothing."""

from __future__ import annotations

import math

from conftest import quick_cfg

from bugzoo.harness.runner import execute

SHORT = ("harness.steps=40", "harness.eval_interval=10")


def test_a_complete_resume_continues_the_run_bitwise():
    """Model, optimizer, schedule and scaler restored: the run is the one that never stopped
    (fp16 with its loss scaler on the mlp, and the transformer)."""
    for scenario in ("mlp-clean-fp16_scaler", "transformer-clean"):
        plain = execute(quick_cfg(f"scenario={scenario}", *SHORT)).summary
        restarted = execute(quick_cfg(f"scenario={scenario}", *SHORT,
                                      "harness.restart_at=20")).summary
        assert restarted["trace_digest"] == plain["trace_digest"], scenario


def test_early_stopping_stops_once_validation_stops_improving():
    """With the learning rate at 0 the validation loss never improves on its first value: a
    patience of 2 evaluations stops the run at the third."""
    run = execute(quick_cfg("scenario=mlp-clean", *SHORT, "optim.lr=0",
                            "harness.early_stop_patience=2"))
    assert run.summary["steps_completed"] == 30 and run.summary["outcome"] == "completed"
    assert run.trace.step.iloc[-1] == 29
    learning = execute(quick_cfg("scenario=mlp-clean", *SHORT, "harness.early_stop_patience=2"))
    assert learning.summary["steps_completed"] == 40


def test_an_evaluation_before_training_fills_the_first_row():
    run = execute(quick_cfg("scenario=mlp-clean", *SHORT, "harness.eval_at_start=true"))
    first = run.trace.iloc[0]
    assert abs(first.val_loss - math.log(6)) < 0.05  # the untrained model: about log C
    assert run.summary["initial_val_loss"] == first.val_loss
    assert run.summary["startup_s"] > 0
    plain = execute(quick_cfg("scenario=mlp-clean", *SHORT)).summary
    assert math.isnan(plain["initial_val_loss"])
