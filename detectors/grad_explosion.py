"""``grad_explosion``: alarm when the gradient norm jumps far above its running median."""

from __future__ import annotations

import math
from collections import deque
from statistics import median

from bugzoo import Alarm, Detector, Observation, RunView


class GradExplosion(Detector):
    """Heuristic: after ``warmup`` steps, a gradient norm above ``factor`` x the median of the
    last ``window`` finite norms for ``patience`` consecutive steps is an explosion (``optim``
    alarm, raised once, at the step where it became sustained). Requiring a sustained excess
    ignores the isolated spikes of healthy recurrent-net training.

    Non-finite norms are left to the ``nonfinite`` detector.
    """

    observation_only = True

    def __init__(self, factor: float = 10.0, window: int = 50, warmup: int = 10,
                 patience: int = 3):
        self.factor = factor
        self.window = window
        self.warmup = warmup
        self.patience = patience

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.history: deque[float] = deque(maxlen=self.window)
        self.streak = 0
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        norm = obs.grad_norm
        if self.fired or not math.isfinite(norm):
            return []
        alarms = []
        if len(self.history) >= self.warmup:
            baseline = median(self.history)
            exceeds = baseline > 0 and norm > self.factor * baseline
            self.streak = self.streak + 1 if exceeds else 0
            if self.streak >= self.patience:
                self.fired = True
                alarms.append(self.alarm(
                    obs.step, "grad_explosion", "optim",
                    f"gradient norm {norm:.3g} is {norm / baseline:.1f}x the running median "
                    f"{baseline:.3g}"))
        self.history.append(norm)
        return alarms
