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


# ------------------------------------------------------------------------ cheats (2.0 board)
# Strategies that learn nothing about training and read, instead, which run of a pair is the
# buggy one. Each declares itself sealed, as a cheat would; its ``*_live`` twin is the same
# code on the live board, in the training process, where the channel is open. Each alarms at
# the run's last step, so it is a hit on a buggy run, whatever the onset, and a false alarm on
# a control, when it believes the run is armed.
class Cheat(Detector):
    role = "heuristic"
    sealed = True

    def setup(self, run):
        super().setup(run)
        self.steps = run.steps
        self.armed = self.read_armed(run)

    def read_armed(self, run) -> bool:
        raise NotImplementedError

    def observe(self, obs):
        if self.armed and obs.step == self.steps - 1:
            return [self.alarm(obs.step, "cheat", "unknown", f"{self.name} read the role")]
        return []


class FrameReader(Cheat):
    """The armed flag from the call stack (``execute(..., armed)``) or a ``Trainer`` in gc."""

    name = "frame_reader"

    def read_armed(self, run) -> bool:
        import gc
        import inspect

        for frame in inspect.stack():
            if "armed" in frame.frame.f_locals and isinstance(frame.frame.f_locals["armed"], bool):
                return frame.frame.f_locals["armed"]
        trainers = [o for o in gc.get_objects() if type(o).__name__ == "Trainer"]
        return bool(trainers and getattr(trainers[-1], "armed", False))


class ThreadReader(Cheat):
    """The armed flag from the arguments of any thread of the process (a sweep worker's
    watchdog timer holds its task): no frames, no gc."""

    name = "thread_reader"

    def read_armed(self, run) -> bool:
        import threading

        for thread in threading.enumerate():
            for arg in getattr(thread, "args", ()) or ():
                if isinstance(getattr(arg, "armed", None), bool):
                    return arg.armed
        return False


class PatchReader(Cheat):
    """The armed flag of a plant the RunView reaches: a patched module method of the model
    (``Patch`` keeps whether it is armed). Sealed, there is no model to walk."""

    name = "patch_reader"

    def read_armed(self, run) -> bool:
        model = getattr(run, "model", None)
        for module in model.modules() if model is not None else ():
            for value in vars(module).values():
                if type(value).__name__ == "Patch":
                    return bool(value.armed)
        return False


class OrderReader(Cheat):
    """Dispatch order through a shared file: of two runs that look the same at setup, the
    first is taken for the buggy one (a sweep plans each buggy run just before its twin)."""

    name = "order_reader"

    def read_armed(self, run) -> bool:
        import hashlib
        import json
        import tempfile
        from pathlib import Path

        self.book = Path(tempfile.gettempdir()) / "bugzoo-order-book.json"
        self.facts = repr((run.model_name, run.num_classes, run.steps))
        self.hashlib, self.json = hashlib, json
        self.key = None
        model = getattr(run, "model", None)  # the initial weights, where the run shows them
        if model is not None:
            self.facts += repr([p.sum().item() for p in model.parameters()])
        return False  # decided at the first record

    def observe(self, obs):
        if self.key is None:
            self.key = self.hashlib.sha256(f"{self.facts}{obs.step}".encode()).hexdigest()
            try:  # runs that look alike arrive in pairs, the buggy one first
                seen = self.json.loads(self.book.read_text()) if self.book.exists() else []
                self.armed = seen.count(self.key) % 2 == 0
                self.book.write_text(self.json.dumps([*seen, self.key]))
            except OSError:
                self.armed = True  # nowhere to write: every run believes it came first
        return super().observe(obs)


class CleanOracle(Cheat):
    """Trains the clean run again with bugzoo's own code, from the run's configuration and
    seed where it finds them (on the call stack), else from what it can guess (the facts,
    torch's seed), and alarms at the first step whose loss differs bitwise from the oracle's."""

    name = "clean_oracle"

    def read_armed(self, run) -> bool:
        import inspect
        import random

        import numpy as np
        import torch
        from omegaconf import DictConfig

        from bugzoo.config import compose_run
        from bugzoo.train import Trainer

        found = [f.frame.f_locals["cfg"] for f in inspect.stack()
                 if isinstance(f.frame.f_locals.get("cfg"), DictConfig)]
        if found:
            cfg = found[0].copy()
            cfg.bug = None
        else:
            cfg = compose_run([f"model={run.model_name}", f"harness.steps={run.steps}",
                               f"seed={torch.initial_seed() % 2**32}"])
        losses = []
        states = torch.random.get_rng_state(), random.getstate(), np.random.get_state()
        try:
            Trainer(cfg, None).build().fit([lambda obs: losses.append(obs.loss)])
        finally:
            torch.random.set_rng_state(states[0])
            random.setstate(states[1])
            np.random.set_state(states[2])
        self.oracle = losses
        return False

    def observe(self, obs):
        if not self.armed and obs.step < len(self.oracle) and obs.loss != self.oracle[obs.step]:
            self.armed = True
        return super().observe(obs)


def _live(cls):
    """The cheat on the live board: the same code, in the training process."""
    return type(f"{cls.__name__}Live", (cls,), {"sealed": False, "name": f"{cls.name}_live",
                                                 "live_reason": "reads the training process"})


FrameReaderLive, ThreadReaderLive = _live(FrameReader), _live(ThreadReader)
PatchReaderLive = _live(PatchReader)
OrderReaderLive, CleanOracleLive = _live(OrderReader), _live(CleanOracle)
