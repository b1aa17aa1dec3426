"""``loss_forensics``: read the loss curve for divergence, oscillation and spikes."""

from __future__ import annotations

import math
import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class LossForensics(Detector):
    """Recipe: loss-curve forensics (reference notes: divergence, oscillation, spikes).

    * divergence: the median of the last ``window`` losses exceeds ``diverge`` times the median
      of the first ``window`` (loss going up, not down);
    * spike: one loss above the running median plus ``spike_mads`` median absolute deviations
      and ``spike_ratio`` times that median, that also undoes at least ``undo`` of the progress
      made so far (rises above the running median by that share of the distance from the first
      losses down to it), ``spikes`` times. Near convergence a loss of 0.05 against a median of
      0.005 is ten times the median yet one misclassified example: a spike that matters sends
      training back, measured on the scale of the whole descent;
    * oscillation: over the last ``2 * window`` steps the loss swings by more than
      ``oscillate`` times the first losses while making no progress. The swing is the median
      step-to-step change, so one outlier batch (two large changes) is not an oscillation.

    All three suggest an optimisation problem (``optim``: learning rate too high, stale or
    accumulated gradients). Non-finite losses are left to the ``nonfinite`` detector.
    """

    observation_only = True

    def __init__(self, window: int = 10, diverge: float = 1.5, spike_mads: float = 10.0,
                 spike_ratio: float = 3.0, spikes: int = 3, oscillate: float = 0.5,
                 undo: float = 0.5):
        self.window, self.diverge, self.undo = window, diverge, undo
        self.spike_mads, self.spike_ratio, self.spikes = spike_mads, spike_ratio, spikes
        self.oscillate = oscillate

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.losses: list[float] = []
        self.spike_steps: list[int] = []
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not math.isfinite(obs.loss):
            return []
        w = self.window
        recent = self.losses[-4 * w:]
        self.losses.append(obs.loss)
        if len(self.losses) < 2 * w:
            return []
        start = statistics.median(self.losses[:w])
        found = None
        now = statistics.median(self.losses[-w:])
        if now > self.diverge * start:
            found = ("divergence", f"loss median {now:.3g} over the last {w} steps exceeds "
                                   f"{self.diverge:g} x the initial {start:.3g}")
        med = statistics.median(recent)
        mad = statistics.median(abs(x - med) for x in recent)
        undoes = obs.loss - med > self.undo * (start - med)
        if obs.loss > med + self.spike_mads * mad and obs.loss > self.spike_ratio * med and undoes:
            self.spike_steps.append(obs.step)
            if len(self.spike_steps) >= self.spikes and found is None:
                found = ("loss_spikes", f"{len(self.spike_steps)} loss spikes (steps "
                                        f"{self.spike_steps[:5]}), latest {obs.loss:.3g} vs "
                                        f"running median {med:.3g}")
        tail = self.losses[-2 * w:]
        if found is None and len(self.losses) >= 4 * w:
            swing = statistics.median(abs(b - a) for a, b in zip(tail, tail[1:], strict=False))
            progress = statistics.median(self.losses[-4 * w:-2 * w]) - statistics.median(tail)
            if swing > self.oscillate * start and progress <= 0:
                found = ("oscillation", f"loss swings by a median {swing:.3g} a step "
                                        f"(> {self.oscillate:g} x initial {start:.3g}) "
                                        "without progress")
        if found is None:
            return []
        self.fired = True
        return [self.alarm(obs.step, found[0], "optim", found[1])]
