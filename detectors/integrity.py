"""Integrity rows: strategies that detect nothing and would still score on a naive board.

Each is scored on every board beside the baselines, and the paired score must give each about 0:

* ``settings_reader`` alarms at step 0 when the run trains on its model's default settings.
  Most buggy scenarios do and most healthy variants do not, so against unmatched clean runs it
  looked like a detector; against its own control, which has the same settings, it is not.
* ``trace_memoriser`` alarms when the trace leaves every published clean trace of its model
  (``results/traces``, the dev split). On the dev split it catches every bug that shows in the
  trace without a false alarm; on the test split, whose seeds nobody has seen, every run
  leaves the published traces at once, buggy or not.

A third, ``label_peeker``, reads the planted bug's identity from inside the run process; it is
test-only (``tests/faults``), since it reads what no tool may.
"""

from __future__ import annotations

import math
import os
from functools import cache
from pathlib import Path

import numpy as np

import bugzoo
from bugzoo import Alarm, Detector, Observation, RunView

# Each model's default settings, as a cheater would note them from the catalogue: steps,
# optimizer, learning rate, weight decay, batch size, schedule, label smoothing, parameters.
DEFAULTS = {
    "mlp": (300, "AdamW", 0.01, 0.01, 32, "LambdaLR", 0.0, 19462),
    "lstm": (300, "AdamW", 0.01, 0.01, 32, "LambdaLR", 0.0, 30146),
    "transformer": (300, "AdamW", 0.01, 0.01, 32, "LambdaLR", 0.0, 23170),
    "resnet": (300, "AdamW", 0.01, 0.01, 32, "LambdaLR", 0.0, 19862),
}


def fingerprint(run: RunView) -> tuple:
    """The settings of a run as its objects show them."""
    group = run.optimizer.param_groups[0]
    return (run.steps, type(run.optimizer).__name__, group.get("initial_lr", group["lr"]),
            group.get("weight_decay"), getattr(run.train_loader, "batch_size", None),
            type(run.lr_scheduler).__name__ if run.lr_scheduler is not None else None,
            float(getattr(run.loss_fn, "label_smoothing", 0.0)),
            sum(p.numel() for p in run.model.parameters()))


class SettingsReader(Detector):
    """Integrity row: alarms at step 0 when the run's settings are its model's defaults."""

    role = "baseline"

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.defaults = DEFAULTS.get(run.model_name) == fingerprint(run)

    def observe(self, obs: Observation) -> list[Alarm]:
        if obs.step == 0 and self.defaults:
            return [self.alarm(0, "default_settings", "unknown",
                               "the run trains on its model's default settings")]
        return []


def published_traces() -> Path:
    """The published dev trace set: ``BUGZOO_TRACES``, else ``results/traces`` of the
    checkout."""
    return Path(os.environ.get("BUGZOO_TRACES") or
                Path(bugzoo.__file__).resolve().parents[1] / "results" / "traces")


@cache
def clean_losses(folder: Path, model: str) -> np.ndarray:
    """The training losses of every published clean run of ``model``: [runs, steps], NaN
    where a run is shorter."""
    import pandas as pd  # here: only this detector reads the trace set

    runs = pd.read_parquet(folder / "runs.parquet")
    clean = runs[(runs["model"] == model) & (runs["role"] != "buggy")] if "role" in runs \
        else runs[(runs["model"] == model) & runs["bug"].isna()]
    trace = pd.read_parquet(folder / "trace.parquet", columns=["run", "step", "loss"])
    trace = trace[trace["run"].isin(clean.index if "run" not in clean else clean["run"])]
    table = trace.pivot(index="run", columns="step", values="loss")
    return table.to_numpy(dtype=float)


class TraceMemoriser(Detector):
    """Integrity row: alarms at the first step whose training loss matches no published clean
    trace of the run's model that matched it so far."""

    role = "baseline"
    observation_only = True

    @staticmethod
    def available() -> str | None:
        if not (published_traces() / "runs.parquet").is_file():
            return f"no published trace set at {published_traces()} (set BUGZOO_TRACES)"
        return None

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.candidates = clean_losses(published_traces(), run.model_name).copy()
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired:
            return []
        if obs.step < self.candidates.shape[1]:
            column = self.candidates[:, obs.step]
            same = (np.isclose(column, obs.loss, rtol=1e-7, atol=0.0)
                    | (np.isnan(column) & math.isnan(obs.loss)))
            self.candidates = self.candidates[same]
        if len(self.candidates):
            return []
        self.fired = True
        return [self.alarm(obs.step, "unseen_trace", "unknown",
                           "the loss left every published clean trace of this model")]
