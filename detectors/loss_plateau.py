"""``loss_plateau``: alarm when the smoothed training loss stops improving while still high."""

from __future__ import annotations

import math

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation


class LossPlateau(Detector):
    """Heuristic: an exponential moving average of the loss (``smoothing``) that has not
    improved on its best value by ``min_rel_improvement`` for ``window`` steps, while it is still
    above ``high_frac`` x log(num_classes) (chance level), is a stalled run (``optim`` alarm,
    raised once). The window shrinks to a quarter of the run for short runs.
    """

    observation_only = True

    def __init__(self, window: int = 50, smoothing: float = 0.9,
                 min_rel_improvement: float = 0.01, high_frac: float = 0.5):
        self.window = window
        self.smoothing = smoothing
        self.min_rel_improvement = min_rel_improvement
        self.high_frac = high_frac

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.patience = max(5, min(self.window, run.steps // 4))
        self.floor = self.high_frac * math.log(max(2, run.num_classes))
        self.ema: float | None = None
        self.best = math.inf
        self.best_step = 0
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not math.isfinite(obs.loss):
            return []
        b = self.smoothing
        self.ema = obs.loss if self.ema is None else b * self.ema + (1 - b) * obs.loss
        if self.ema < self.best * (1 - self.min_rel_improvement):
            self.best, self.best_step = self.ema, obs.step
            return []
        if obs.step - self.best_step >= self.patience and self.ema > self.floor:
            self.fired = True
            return [self.alarm(obs.step, "loss_plateau", "optim",
                               f"smoothed loss {self.ema:.3g} has not improved for "
                               f"{obs.step - self.best_step} steps (chance level "
                               f"{math.log(max(2, self.run.num_classes)):.3g})")]
        return []
