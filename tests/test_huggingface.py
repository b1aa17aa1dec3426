"""Hugging Face: a bugzoo detector inside a real ``transformers.Trainer`` training our mlp, and
a ``TrainerCallback`` benchmarked as a bugzoo detector. README's examples are what runs."""

from __future__ import annotations

import os

import pytest
from conftest import quick_cfg, readme_examples

from bugzoo.harness.runner import execute


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> dict:
    """README's Hugging Face examples run in one namespace (in a folder of their own, where the
    Trainer may write): a real training run that diverges."""
    namespace: dict = {"__name__": "readme_huggingface"}
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("hf"))
    try:
        for block in readme_examples("Hugging Face", "python"):
            exec(compile(block, "README.md", "exec"), namespace)
    finally:
        os.chdir(here)
    return namespace


def test_a_detector_alarms_logs_and_stops_a_real_trainer(example):
    watch, state = example["watch"], example["trainer"].state
    first = watch.alarms[0]
    assert (first.symptom, first.category) == ("nonfinite", "numerics")
    assert state.global_step == first.step + 1 < 16  # stopped on the alarm
    assert {"bugzoo_alarm": f"nonfinite: nonfinite: {first.message}", "step": first.step} in (
        state.log_history)


def test_a_trainer_callback_is_benchmarked_as_a_detector(example, tmp_path):
    guard = example["Guard"]()
    guard.name = "guard"
    result = execute(quick_cfg("scenario=mlp-lr_too_high", steps=30), [guard])
    nonfinite = int(result.trace.loc[result.trace["nonfinite_loss"], "step"].iloc[0])
    assert result.alarms[["step", "symptom"]].values.tolist() == [[nonfinite, "stop_requested"]]
    assert result.summary["detectors"]["guard"]["error"] is None
    from transformers import Trainer  # here, not at collection: every xdist worker would pay

    args = example["args"]  # and inside a real Trainer the monitor stops it the same way
    args.output_dir, args.logging_steps, args.logging_nan_inf_filter = str(tmp_path), 1, False
    trainer = Trainer(model=example["Classifier"](), args=args, train_dataset=example["rows"],
                      callbacks=[example["LossGuard"]()])
    trainer.train()
    assert trainer.state.global_step < args.max_steps
