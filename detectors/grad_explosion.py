"""``grad_explosion``: alarm when the gradient norm jumps far above its running median."""

from __future__ import annotations

import math
from collections import deque
from statistics import median

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation


class GradExplosion(Detector):
    """Heuristic: after ``warmup`` steps, a gradient norm above ``factor`` x the median of the
    last ``window`` finite norms is an explosion (``optim`` alarm, raised once).

    Non-finite norms are left to the ``nonfinite`` detector.
    """

    def __init__(self, factor: float = 10.0, window: int = 50, warmup: int = 10):
        self.factor = factor
        self.window = window
        self.warmup = warmup

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.history: deque[float] = deque(maxlen=self.window)
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        norm = obs.grad_norm
        if self.fired or not math.isfinite(norm):
            return []
        alarms = []
        if len(self.history) >= self.warmup:
            baseline = median(self.history)
            if baseline > 0 and norm > self.factor * baseline:
                self.fired = True
                alarms.append(self.alarm(
                    obs.step, "grad_explosion", "optim",
                    f"gradient norm {norm:.3g} is {norm / baseline:.1f}x the running median "
                    f"{baseline:.3g}"))
        self.history.append(norm)
        return alarms
