"""Trivial reference detectors: what a score is worth when nothing is detected.

They are scored beside every real detector, and the leaderboard's primary score must give each
of them about 0 (``tests/test_scoring.py`` checks it on a real sweep): a scoring rule under which
a constant alarm wins would rank tools by luck. They are never members of a suite.
"""

from __future__ import annotations

import hashlib
import random

from bugzoo import Alarm, Detector, Observation, RunView


class AlwaysAlarm(Detector):
    """Baseline: one alarm at step 0 of every run."""

    role = "baseline"
    observation_only = True

    def observe(self, obs: Observation) -> list[Alarm]:
        if obs.step == 0:
            return [self.alarm(0, "always", "unknown", "alarms on every run, at its first step")]
        return []


class NeverAlarm(Detector):
    """Baseline: never alarms."""

    role = "baseline"
    observation_only = True

    def observe(self, obs: Observation) -> list[Alarm]:
        return []


class RandomAlarm(Detector):
    """Baseline: alarms at each step with probability ``p`` (the first time only), from a
    generator of its own seeded with ``seed`` and the run's initial weights, so it is
    reproducible, differs between runs of different seeds, and behaves identically on a buggy
    run and its clean control (same initial weights) whatever the bug does.

    The default ``p`` = 0.0023 makes about half of 300-step runs alarm (1 - (1 - p)^300 = 0.5).
    """

    role = "baseline"

    def __init__(self, p: float = 0.0023, seed: int = 0):
        self.p, self.seed = p, seed

    def setup(self, run: RunView) -> None:
        super().setup(run)
        first = next(run.model.parameters()).detach().cpu().float().numpy().tobytes()
        digest = hashlib.sha256(str(self.seed).encode() + first).digest()
        self.rng = random.Random(int.from_bytes(digest[:8], "little"))
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or self.rng.random() >= self.p:
            return []
        self.fired = True
        return [self.alarm(obs.step, "random", "unknown",
                           f"a coin with p={self.p:g} per step came up at step {obs.step}")]
