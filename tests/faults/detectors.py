"""Misbehaving detectors for fault-injection tests (installed as plug-ins by ``faults.install``)."""

from __future__ import annotations

import os
import time

import torch

from bugzoo.detector import Detector


class Boom(Detector):
    """Raises in ``observe`` at step 3."""

    name = "boom"

    def observe(self, obs):
        if obs.step == 3:
            raise RuntimeError("boom at step 3")
        return []


class Crasher(Detector):
    """Ends its process at step 3 without a word, as a segfault in an extension would."""

    name = "crasher"

    def observe(self, obs):
        if obs.step == 3:
            os._exit(70)
        return []


class Stall(Detector):
    """Hangs in ``observe`` at step 2 (sleeps far past any per-call budget)."""

    name = "stall"

    def observe(self, obs):
        if obs.step == 2:
            time.sleep(600)
        return []


class Meddler(Detector):
    """Halves every model parameter at step 5: an invasive detector."""

    name = "meddler"

    def observe(self, obs):
        if obs.step == 5:
            with torch.no_grad():
                for p in self.run.model.parameters():
                    p.mul_(0.5)
        return []


class SlowStarter(Detector):
    """Takes ``seconds`` (default 4 s) in ``setup``: a watcher with a slow start, such as a probe
    training a copy of the model."""

    name = "slow_starter"

    def __init__(self, seconds: float = 4.0):
        self.seconds = seconds

    def setup(self, run):
        super().setup(run)
        time.sleep(self.seconds)


class AlwaysOn(Detector):
    """Alarms at every step: an outside plug-in that must never count as bugzoo's own."""

    name = "always_on"

    def observe(self, obs):
        return [self.alarm(obs.step, "always_on", "unknown", "alarm")]


class Laggard(Detector):
    """Takes 0.1 s in every ``observe``: a slow but well-behaved watcher."""

    name = "laggard"

    def observe(self, obs):
        time.sleep(0.1)
        return []
