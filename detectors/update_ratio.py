"""``update_ratio``: the size of each update relative to the weights, outside [1e-4, 1e-1]."""

from __future__ import annotations

import math
import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class UpdateRatio(Detector):
    """Heuristic: the update/parameter norm ratio ||dW|| / ||W|| of a healthy run sits around
    1e-3 (Karpathy's rule of thumb); far above ``high`` the step size is destructive, far below
    ``low`` nothing learns.

    Uses the median ratio over ``window`` steps. The high bound counts only while the loss has
    made no progress: the window's median loss is not below the first loss. Adam moves every
    weight by about the learning rate on its first steps, whatever the gradients' size, so a
    hot but healthy learning rate rewrites a tenth of the weights' size per step early on while
    the loss falls fast; a destructive step size is one the loss does not survive.

    The low bound is only checked while the learning rate is at least ``lr_share`` of the
    largest learning rate seen, so warm-up and the tail of a decaying schedule do not count,
    and while the loss is still above ``unlearned`` x its first value: small updates are the
    goal once the loss has fallen (gradients vanish as the model fits), and a sign of a stuck
    optimizer only while there is still most of it to learn. Category ``optim``.
    """

    observation_only = True

    def __init__(self, low: float = 1e-4, high: float = 1e-1, window: int = 10,
                 lr_share: float = 0.2, unlearned: float = 0.5):
        self.low, self.high, self.window, self.lr_share = low, high, window, lr_share
        self.unlearned = unlearned

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.ratios: list[float] = []
        self.losses: list[float] = []
        self.max_lr = 0.0
        self.first_loss: float | None = None
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not math.isfinite(obs.update_ratio):
            return []
        self.max_lr = max(self.max_lr, obs.lr)
        if self.first_loss is None and math.isfinite(obs.loss):
            self.first_loss = obs.loss
        self.ratios.append(obs.update_ratio)
        self.losses.append(obs.loss)
        if len(self.ratios) < self.window:
            return []
        ratio = statistics.median(self.ratios[-self.window:])
        if ratio > self.high and self.no_progress():
            kind, bound = "update_ratio_high", f"above {self.high:g}"
        elif (ratio < self.low and obs.lr >= self.lr_share * self.max_lr
              and self.still_learning(obs.loss)):
            kind, bound = "update_ratio_low", f"below {self.low:g}"
        else:
            return []
        self.fired = True
        return [self.alarm(obs.step, kind, "optim",
                           f"median update/param ratio {ratio:.2e} over {self.window} steps is "
                           f"{bound} (lr {obs.lr:.2e})")]

    def no_progress(self) -> bool:
        """Whether the median loss of the last window is not below the first loss (a
        non-finite loss counts as no progress)."""
        recent = [x if math.isfinite(x) else math.inf for x in self.losses[-self.window:]]
        return self.first_loss is None or statistics.median(recent) >= self.first_loss

    def still_learning(self, loss: float) -> bool:
        """Whether the loss is still above ``unlearned`` x its first value (or not finite)."""
        first = self.first_loss
        return first is None or not math.isfinite(loss) or loss > self.unlearned * first
