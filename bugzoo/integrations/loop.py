"""bugzoo's sealed detectors on a plain PyTorch loop: :func:`watch`, and the trace it writes.

::

    with bugzoo.watch(model, optimizer, num_classes=10, steps=1000, trace="run.trace") as w:
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            w.step(loss)  # optional where the loss is a local named ``loss`` of the loop

The watch hangs on the optimizer's own step hooks: before each step it measures the gradients,
after it the parameters, and it reads the step's loss from :meth:`LoopWatch.step` or, failing
that, from the local variable ``loss`` of the code that called ``optimizer.step()``. Each step
becomes one record of the bugzoo trace (:mod:`~bugzoo.integrations.recorder`), streamed to
the sealed detectors as it is made; it only reads tensors, so the loop computes exactly what it
would unwatched. Each alarm is logged once, and the trace folder is what ``bugzoo check-trace``
rescores.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from types import FrameType

import torch
from torch import nn

from bugzoo.integrations.recorder import DEFAULT_DETECTORS, TraceRecorder
from bugzoo.trace import RunFacts

log = logging.getLogger(__name__)


class StopTraining(Exception):  # noqa: N818 - it is a request, not an error
    """Raised out of ``optimizer.step()`` at the first alarm of a watch made with
    ``stop_on_alarm=True``; the ``with`` block of :func:`watch` ends quietly on it."""


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame, going outwards from ``frame``, whose code is neither torch's nor
    bugzoo's: the loop that called ``optimizer.step()``."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.split(".")[0] in ("torch", "bugzoo") or module == __name__):
            return frame
        frame = frame.f_back
    return None


def loss_in(frame: FrameType | None) -> torch.Tensor | None:
    """The frame's local (or, at a script's top level, global) ``loss``, if it is a one-element
    tensor."""
    if frame is None:
        return None
    value = frame.f_locals.get("loss", frame.f_globals.get("loss"))
    return value if isinstance(value, torch.Tensor) and value.numel() == 1 else None


class LoopWatch(TraceRecorder):
    """A plain loop's optimizer watched by sealed detectors (made by :func:`watch`)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS,
                 num_classes: int = 0, steps: int = 0, loss_floor: float = 0.0,
                 dataset: str | None = None, trace: str | Path | None = None,
                 stop_on_alarm: bool = False):
        super().__init__(model, RunFacts(model_name=type(model).__name__, dataset=dataset,
                                         num_classes=int(num_classes), steps=int(steps),
                                         loss_floor=float(loss_floor),
                                         device=next(model.parameters()).device.type),
                         detectors)
        self.optimizer = optimizer
        self.trace = Path(trace) if trace is not None else None
        self.stop_on_alarm = stop_on_alarm
        self._handles: list = []
        self._pending = False  # a step was taken and waits for its loss
        self._given: tuple | None = None  # a loss (and validation) given before its step
        self._found: torch.Tensor | None = None  # the loop's ``loss`` when the step began
        self._warned = False

    # --------------------------------------------------------------- the context manager
    def __enter__(self) -> LoopWatch:
        self.begin()
        self._handles = [self.optimizer.register_step_pre_hook(self._before),
                         self.optimizer.register_step_post_hook(self._after)]
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._pending:
            self._record(self._found)
        self.finish(self.trace)
        return kind is not None and issubclass(kind, StopTraining)

    # ------------------------------------------------------------------------ each step
    def step(self, loss: torch.Tensor, val_loss: float | None = None,
             val_acc: float | None = None) -> None:
        """The training loss of the step just taken (or, called before ``optimizer.step()``,
        of the step about to be taken), with the validation loss and accuracy when the loop
        evaluated."""
        if self._pending:
            self._record(loss, val_loss, val_acc)
        else:
            self._given = (loss, val_loss, val_acc)

    def _before(self, optimizer, *_) -> None:
        if self._pending:  # the last step's loss was never given: the one the loop held
            self._record(self._found)
        self._found = loss_in(user_frame(sys._getframe(1)))
        self.before_step(optimizer, self.model.training)

    def _after(self, *_) -> None:
        if self._given is not None:
            given, self._given = self._given, None
            self._record(*given)
        else:
            self._pending = True

    def _record(self, loss: torch.Tensor | None, val_loss: float | None = None,
                val_acc: float | None = None) -> None:
        self._pending = False
        if loss is None:
            if not self._warned:
                log.warning("bugzoo watch: no loss for step %d: pass it with w.step(loss), "
                            "or name it `loss` in the loop; steps without one are not "
                            "watched", self.index)
                self._warned = True
            self.skip()
            return
        if self.record(loss, val_loss, val_acc) and self.stop_on_alarm:
            raise StopTraining(f"stopped at step {self.index - 1}: "
                               f"{self.alarms[-1]['message']}")


def watch(model: nn.Module, optimizer: torch.optim.Optimizer, **options) -> LoopWatch:
    """Watch a plain loop's ``optimizer`` (training ``model``) with bugzoo's sealed detectors:
    ``with bugzoo.watch(model, optimizer) as w: ...``. Options: ``detectors`` (names and
    selectors, default the sealed built-ins), the run's facts ``num_classes`` (0 if not a
    classifier), ``steps``, ``loss_floor`` and ``dataset``, ``trace`` (a folder to write the
    trace to at the end) and ``stop_on_alarm``."""
    return LoopWatch(model, optimizer, **options)
