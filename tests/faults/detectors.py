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


def peek_label() -> tuple[str | None, int]:
    """The planted bug's id and onset, read the three ways an outside reviewer found: a patched
    method's replacement (its module globals, its code's file name, its clock), the call stack
    (the run's config in a caller's frame) and the garbage collector (the Trainer)."""
    import gc
    import sys
    from pathlib import Path

    from omegaconf import DictConfig

    from bugzoo.bugs.base import Patch
    from bugzoo.train import Trainer

    for obj in gc.get_objects():
        if isinstance(obj, Patch):
            planted = obj.replacement.__globals__.get("BUG")
            onset = obj.clock.onset if obj.clock else 0
            if planted is not None:
                return planted.id, onset
            if "bugs" in Path(obj.replacement.__code__.co_filename).parts:
                return Path(obj.replacement.__code__.co_filename).stem, onset
    frame = sys._getframe()
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, DictConfig) and value.get("bug"):
                return str(value.bug.id), int(value.bug.onset)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, Trainer) and obj.bug is not None:
            return obj.bug.id, obj.onset
    return None, 0


class LabelPeeker(Detector):
    """Integrity row, test-only: reads the planted bug's label from inside the run process and
    alarms at its onset. Its control carries the same label, so it must score about 0."""

    name = "label_peeker"
    role = "baseline"

    def setup(self, run):
        super().setup(run)
        self.label, self.onset = peek_label()

    def observe(self, obs):
        if self.label is not None and obs.step == self.onset:
            return [self.alarm(obs.step, "label", "unknown", f"the run plants {self.label}")]
        return []
