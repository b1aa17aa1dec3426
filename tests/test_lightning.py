"""Lightning: a bugzoo detector inside a real ``lightning.Trainer`` fitting our mlp, and a
Lightning callback benchmarked as a bugzoo detector. The examples in
docs/pages/integrations.md are what run."""

from __future__ import annotations

import pytest
from conftest import check_callback_trace, doc_examples, quick_cfg
from torch.utils.data import DataLoader, TensorDataset

from bugzoo.harness.runner import execute


def test_a_detector_in_a_real_fit_and_a_lightning_monitor_as_a_detector(tmp_path, monkeypatch):
    """One test, so one worker pays for importing Lightning."""
    monkeypatch.chdir(tmp_path)  # where the docs' trace folder goes
    example: dict = {"__name__": "readme_lightning"}  # the docs' examples: a fit that diverges
    for block in doc_examples("Lightning", "python"):
        exec(compile(block, "docs/pages/integrations.md", "exec"), example)
    watch, trainer = example["watch"], example["trainer"]
    first = watch.alarms[0]
    assert (first.symptom, first.category) == ("nonfinite", "numerics")
    assert trainer.global_step == first.step + 1 < 200  # stopped on the alarm
    assert trainer.callback_metrics["bugzoo/nonfinite"] == len(watch.alarms)

    check_callback_trace(example, tmp_path / "lightning-trace", 60)  # its trace, rescored

    divergence = example["Divergence"]()  # the user's monitor, in bugzoo's loop as in a bench
    divergence.name = "divergence"
    result = execute(quick_cfg("scenario=mlp-lr_too_high", steps=30), [divergence])
    assert "anomaly/grad_spike" in set(result.alarms["symptom"])
    raised = result.alarms[result.alarms["symptom"] == "raised"].iloc[0]
    nonfinite = int(result.trace.loc[result.trace["nonfinite_loss"], "step"].iloc[0])
    assert raised["step"] == nonfinite  # from the first step the monitor raised at
    assert raised["message"] == ("on_train_batch_end raised FloatingPointError: "
                                 "the loss is not finite")
    assert result.summary["detectors"]["divergence"]["error"] is None
    import lightning as L  # here, not at collection: every xdist worker would pay for it

    data = example["data"]  # and inside a real Trainer the monitor does what it did there
    fit = L.Trainer(max_steps=100, callbacks=[example["DivergenceMonitor"]()], logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
    with pytest.raises(FloatingPointError, match="not finite"):
        fit.fit(example["Classifier"](),
                DataLoader(TensorDataset(data.train.x, data.train.y), batch_size=32))
