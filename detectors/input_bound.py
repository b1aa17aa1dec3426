"""``input_bound``: training steps that spend much of their time waiting for data."""

from __future__ import annotations

import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class InputBound(Detector):
    """Recipe: the input-pipeline check of a profiler, done on every step.

    The share of each step's wall time spent fetching its batch (``data_s / step_s``) is
    watched; when its median over the last ``window`` steps reaches ``share``, the run is
    input-bound and a ``performance`` alarm is raised. The default 0.2 is the line above which
    TensorFlow's profiler calls a program *highly* input-bound: a fifth of every step is then
    lost to a pipeline that a cache, a vectorised transform or worker processes would hide. The
    median over a window ignores the odd slow fetch and the steps that also evaluate.
    """

    observation_only = True

    def __init__(self, share: float = 0.2, window: int = 20):
        self.share, self.window = share, window

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.shares: list[float] = []
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or obs.step_s <= 0:
            return []
        self.shares.append(obs.data_s / obs.step_s)
        if len(self.shares) < self.window:
            return []
        share = statistics.median(self.shares[-self.window:])
        if share < self.share:
            return []
        self.fired = True
        return [self.alarm(obs.step, "input_bound", "performance",
                           f"steps wait for data {share:.0%} of their time (median of the last "
                           f"{self.window} steps; input-bound from {self.share:.0%})")]
