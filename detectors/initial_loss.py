"""``initial_loss``: the first loss should be close to log(C) for C balanced classes."""

from __future__ import annotations

import math

from bugzoo import Alarm, Detector, Observation, RunView


class InitialLoss(Detector):
    """Recipe: "check the loss at initialisation" — cross-entropy of an untrained classifier is
    about log(C).

    A first loss above ``high`` x log(C) means over-confident wrong outputs (weights too large:
    ``model``); below ``low`` x log(C) means the task is already solved before training, or the
    loss is not the cross-entropy it claims to be (``loss``).
    """

    observation_only = True

    def __init__(self, high: float = 1.5, low: float = 0.5):
        self.high, self.low = high, low

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.expected = math.log(run.num_classes)

    def observe(self, obs: Observation) -> list[Alarm]:
        if obs.step != 0 or not math.isfinite(obs.loss):
            return []
        ratio = obs.loss / self.expected
        if ratio > self.high:
            return [self.alarm(obs.step, "initial_loss_high", "model",
                               f"first loss {obs.loss:.3g} is {ratio:.1f} x log(C) = "
                               f"{self.expected:.3g}: outputs start over-confident (bad init?)")]
        if ratio < self.low:
            return [self.alarm(obs.step, "initial_loss_low", "loss",
                               f"first loss {obs.loss:.3g} is only {ratio:.2f} x log(C) = "
                               f"{self.expected:.3g}: leaked labels or a wrong loss?")]
        return []
