"""``nonfinite``: alarm at the first step whose loss or gradients are NaN or infinite."""

from __future__ import annotations

from bugzoo import Alarm, Detector, Observation, RunView


class NonFiniteSentinel(Detector):
    """Heuristic: a finite training run never produces a NaN/Inf loss or gradient entry.

    Raises one ``numerics`` alarm at the first step where the loss is non-finite or any
    gradient element is; stays silent afterwards (the first alarm is the one that counts).
    """

    observation_only = True

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not (obs.nonfinite_loss or obs.nonfinite_grads > 0):
            return []
        self.fired = True
        what = "loss" if obs.nonfinite_loss else f"{obs.nonfinite_grads} gradient entries"
        return [self.alarm(obs.step, "nonfinite", "numerics",
                           f"non-finite {what} at step {obs.step}")]
