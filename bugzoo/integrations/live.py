"""A bugzoo detector watching a training loop that bugzoo does not run, and a foreign
callback's hooks guarded so that what they raise becomes an alarm.

:class:`LiveWatch` is what the Lightning and Hugging Face callbacks share: it measures each
optimizer step with bugzoo's own :class:`~bugzoo.telemetry.Telemetry`, hands the Observation
to the detector through the same :class:`~bugzoo.harness.watch.Watch` a bugzoo run uses (so a
failing detector never stops the user's training) and returns the alarms raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch
from torch import nn

from bugzoo.detector import Alarm, Detector, RunView, load_detector
from bugzoo.harness.watch import Watch
from bugzoo.telemetry import Telemetry

log = logging.getLogger(__name__)


def missing_extra(library: str, extra: str) -> str:
    """The one-line message for an integration whose optional library is not installed."""
    return (f"this bugzoo integration needs {library}: "
            f'pip install "bugzoo-bench[{extra}]" (or pip install {library})')


def foreign_view(model: nn.Module, optimizer, *, num_classes: int | None, steps: int,
                 dataset: str, lr_scheduler=None, loss_fn: nn.Module | None = None) -> RunView:
    """The RunView of a foreign loop: its live model and optimizer; no bugzoo loaders."""
    device = next(model.parameters()).device
    return RunView(model=model, optimizer=optimizer, loss_fn=loss_fn, train_loader=None,
                   val_loader=None, device=device, num_classes=num_classes or 0, steps=steps,
                   model_name=type(model).__name__, dataset=dataset, lr_scheduler=lr_scheduler)


class LiveWatch:
    """One detector (an instance, or an installed detector's name) on a foreign loop: call
    :meth:`start`, then per optimizer step :meth:`before_optimizer_step` (gradients ready,
    before the step) and :meth:`after_step`, then :meth:`finish`; each returns new alarms."""

    def __init__(self, detector: Detector | str):
        self.detector = load_detector(detector) if isinstance(detector, str) else detector
        self.alarms: list[Alarm] = []

    @property
    def name(self) -> str:
        return self.detector.name

    def start(self, view: RunView) -> list[Alarm]:
        self.telemetry = Telemetry(view.model)
        self.device = view.device
        self.watch = Watch(self.detector)
        self.watch.call("setup", view)
        self.began = self.step_began = time.perf_counter()
        self.lr = 0.0
        return self._new()

    def step_start(self) -> None:
        self.step_began = time.perf_counter()

    def before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        self.telemetry.measure_gradients()
        self.lr = float(optimizer.param_groups[0]["lr"])

    def after_step(self, step: int, loss: torch.Tensor, training: bool,
                   scale: float | None = None) -> list[Alarm]:
        now = time.perf_counter()
        cuda_mb = (torch.cuda.memory_allocated(self.device) / 2**20
                   if self.device.type == "cuda" else 0.0)
        obs = self.telemetry.observe(step, loss, lr=self.lr, training=training,
                                     step_s=now - self.step_began, data_s=0.0,
                                     elapsed_s=now - self.began, cuda_mb=cuda_mb, scale=scale)
        self.watch.call("observe", obs)
        return self._new()

    def finish(self) -> list[Alarm]:
        self.watch.call("teardown")
        if self.watch.error:
            log.warning("bugzoo detector %s failed: %s", self.name, self.watch.error)
        return self._new()

    def _new(self) -> list[Alarm]:
        fresh = [Alarm(a["step"], a["symptom"], a["category"], a["message"])
                 for a in self.watch.alarms[len(self.alarms):]]
        for alarm in fresh:
            log.warning("bugzoo %s alarm at step %d: %s (%s)", self.name, alarm.step,
                        alarm.message, alarm.symptom)
        self.alarms += fresh
        return fresh


def guarded(detector: Detector, step: int, hook: str, category: str,
            call: Callable[[], object]) -> None:
    """Run one hook of the foreign callback a detector wraps; what it raises is queued as an
    alarm (symptom ``raised``, in ``category``) instead of breaking the run."""
    try:
        call()
    except Exception as e:  # the monitor's way of saying something is wrong
        detector.queue(detector.alarm(step, "raised", category,
                                      f"{hook} raised {type(e).__name__}: {e}"))
