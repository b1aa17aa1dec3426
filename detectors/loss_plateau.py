"""``loss_plateau``: alarm when the smoothed training loss stops improving while still high."""

from __future__ import annotations

import math
import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class LossPlateau(Detector):
    """Heuristic: a loss that makes no progress for ``window`` steps while it is still above
    ``high_frac`` of the way from the loss's floor to chance level (log(num_classes)) is a
    stalled run (``optim`` alarm, raised once): the model has learned less than half of what
    there is to learn. The floor is what no model can go below (``RunView.loss_floor``: 0 for
    cross-entropy, the smoothed targets' entropy under label smoothing), so a label-smoothed run
    that has converged is not mistaken for a stalled one. The window shrinks to a quarter of
    the run for short runs.

    Progress is the median loss of the last window against the median of the window before it;
    less than ``min_rel_improvement`` lower is no progress. Medians over whole windows ignore
    both the batch-to-batch noise of the loss (a running best would latch onto a lucky low) and
    the odd outlier batch (a moving average would carry it for dozens of steps).
    """

    observation_only = True

    def __init__(self, window: int = 50, min_rel_improvement: float = 0.01,
                 high_frac: float = 0.5):
        self.window = window
        self.min_rel_improvement = min_rel_improvement
        self.high_frac = high_frac

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.patience = max(5, min(self.window, run.steps // 4))
        self.chance = math.log(max(2, run.num_classes))
        self.floor = run.loss_floor
        self.losses: list[float] = []
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not math.isfinite(obs.loss):
            return []
        self.losses.append(obs.loss)
        w = self.patience
        if len(self.losses) < 2 * w:
            return []
        now = statistics.median(self.losses[-w:])
        before = statistics.median(self.losses[-2 * w:-w])
        learned_less_than_half = now - self.floor > self.high_frac * (self.chance - self.floor)
        if now < before * (1 - self.min_rel_improvement) or not learned_less_than_half:
            return []
        self.fired = True
        return [self.alarm(obs.step, "loss_plateau", "optim",
                           f"median loss {now:.3g} over the last {w} steps is no lower than "
                           f"the {before:.3g} of the {w} before (chance level "
                           f"{self.chance:.3g}, floor {self.floor:.3g})")]
