"""Hugging Face: a bugzoo detector inside a real ``transformers.Trainer`` training our mlp, and
a ``TrainerCallback`` benchmarked as a bugzoo detector. The examples in
docs/pages/integrations.md are what run."""

from __future__ import annotations

from conftest import check_callback_trace, doc_examples, quick_cfg

from bugzoo.harness.runner import execute


def test_a_detector_in_a_real_trainer_and_a_trainer_callback_as_a_detector(tmp_path,
                                                                           monkeypatch):
    """One test, so one worker pays for importing transformers."""
    monkeypatch.chdir(tmp_path)  # where the Trainer may write
    example: dict = {"__name__": "readme_huggingface"}  # the docs' examples: a run that diverges
    for block in doc_examples("Hugging Face", "python"):
        exec(compile(block, "docs/pages/integrations.md", "exec"), example)
    watch, state = example["watch"], example["trainer"].state
    first = watch.alarms[0]
    assert (first.symptom, first.category) == ("nonfinite", "numerics")
    assert state.global_step == first.step + 1 < 16  # stopped on the alarm
    assert {"bugzoo_alarm": f"nonfinite: nonfinite: {first.message}", "step": first.step} in (
        state.log_history)

    check_callback_trace(example, tmp_path / "hf-trace", 16)  # its trace, rescored

    guard = example["Guard"]()  # the user's monitor, in bugzoo's loop as in a bench
    guard.name = "guard"
    result = execute(quick_cfg("scenario=mlp-lr_too_high", steps=30), [guard])
    nonfinite = int(result.trace.loc[result.trace["nonfinite_loss"], "step"].iloc[0])
    assert result.alarms[["step", "symptom"]].values.tolist() == [[nonfinite, "stop_requested"]]
    assert result.summary["detectors"]["guard"]["error"] is None
    args = example["args"]  # and inside a real Trainer the monitor stops it the same way
    args.logging_steps, args.logging_nan_inf_filter = 1, False
    trainer = example["Trainer"](model=example["Classifier"](), args=args,
                                 train_dataset=example["rows"],
                                 callbacks=[example["LossGuard"]()])
    trainer.train()
    assert trainer.state.global_step < args.max_steps
