"""A bugzoo detector watching a training loop that bugzoo does not run (:class:`LiveWatch`),
and a monitor written for such a loop benchmarked as a bugzoo detector
(:class:`CallbackDetector`).

:class:`LiveWatch` is what the Lightning and Hugging Face callbacks share: it measures each
optimizer step with bugzoo's own :class:`~bugzoo.telemetry.Telemetry`, hands the Observation
to the detector through the same :class:`~bugzoo.harness.watch.Watch` a bugzoo run uses (so a
failing detector never stops the user's training) and returns the alarms raised.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping

import torch
from torch import nn

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.detector_registry import load_detector
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
        self.finished = False
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
        """Tear the detector down (once: a fit may end in an exception, then in its end)."""
        if self.finished:
            return []
        self.finished = True
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


class CallbackDetector(Detector):
    """A monitor written for another trainer's callbacks, benchmarked as a bugzoo detector (the
    base of the Lightning and Hugging Face adapters). An alarm is what such a monitor does when
    it finds something: raise (symptom ``raised``), ask the trainer to stop
    (``stop_requested``), or log a metric whose name matches :attr:`anomaly_metrics` with a
    nonzero value (symptom: the metric's name). Its category is :attr:`category`."""

    role = "tool"
    anomaly_metrics = r"anomal|alarm|nonfinite|diverg"
    category = "unknown"

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.stopped = False

    def guarded(self, step: int, hook: str, call: Callable[[], object]) -> None:
        """Run one hook of the monitor; what it raises is queued as an alarm instead of
        breaking the run."""
        try:
            call()
        except Exception as e:  # the monitor's way of saying something is wrong
            self.queue(self.alarm(step, "raised", self.category,
                                  f"{hook} raised {type(e).__name__}: {e}"))

    def verdict(self, step: int, logged: Mapping[str, object], stop: bool) -> list[Alarm]:
        """The step's alarms: those its hooks queued, then one per anomaly among the metrics
        the monitor ``logged``, then one the first time it asked to ``stop``."""
        for name, value in logged.items():
            if (re.search(self.anomaly_metrics, name) and isinstance(value, int | float)
                    and value != 0 and not math.isnan(value)):
                self.queue(self.alarm(step, name, self.category,
                                      f"the callback logged {name}={value:g}"))
        if stop and not self.stopped:
            self.stopped = True
            self.queue(self.alarm(step, "stop_requested", self.category,
                                  "the callback asked the trainer to stop"))
        return self.flush()
