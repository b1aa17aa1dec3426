"""Hugging Face: the bugzoo trace of a ``transformers.Trainer`` run, watched by the sealed
detectors (:class:`TraceCallback`, as :func:`bugzoo.watch` watches a plain loop); any one bugzoo
detector inside a Trainer (:class:`DetectorCallback`); and a ``TrainerCallback`` someone wrote as
their own monitor benchmarked as a bugzoo detector (:class:`TrainerCallbackDetector`). Gradients are read at
``on_pre_optimizer_step``, the last moment the Trainer shows them: after its clipping
(``max_grad_norm``, 1.0 by default), so a detector sees the clipped norms. Needs the
``huggingface`` extra."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.integrations.live import CallbackDetector, LiveWatch, foreign_view, missing_extra
from bugzoo.integrations.recorder import DEFAULT_DETECTORS, TraceRecorder
from bugzoo.telemetry import Observation
from bugzoo.trace import RunFacts

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as e:  # an optional extra: say which
    raise ImportError(missing_extra("transformers", "huggingface")) from e


class _KeepsLosses:
    """A forward hook that keeps the loss among a model's outputs in training
    (``outputs["loss"]``, or the first output), for the callbacks: one per micro-batch."""

    losses: list[torch.Tensor]

    def _keep_loss(self, module: nn.Module, inputs, outputs) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else (
            outputs[0] if isinstance(outputs, tuple | list) else None)
        if module.training and isinstance(loss, torch.Tensor):
            self.losses.append(loss.detach())


class TraceCallback(_KeepsLosses, TrainerCallback):
    """Writes the bugzoo trace of a Trainer's run (to the folder ``trace``, at its end) and
    streams it to the sealed ``detectors`` as it is made, as :func:`bugzoo.watch` does for a
    plain loop. The gradients are read at ``on_pre_optimizer_step`` (after the Trainer's own
    clipping), the step's loss from the model's outputs in training (averaged over accumulated
    micro-batches), and an evaluation's ``eval_loss`` and ``eval_accuracy`` join the next
    step's record. Each alarm is logged once and kept in :attr:`alarms`; ``stop_on_alarm``
    ends training at the first one. ``bugzoo check-trace`` rescores the folder to the same
    alarms."""

    def __init__(self, *, detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS,
                 num_classes: int = 0, loss_floor: float = 0.0, dataset: str | None = None,
                 trace: str | None = None, stop_on_alarm: bool = False):
        self.detectors, self.num_classes, self.dataset = detectors, num_classes, dataset
        self.loss_floor, self.trace, self.stop_on_alarm = loss_floor, trace, stop_on_alarm
        self.recorder: TraceRecorder | None = None
        self.losses: list[torch.Tensor] = []
        self.validation: tuple[float | None, float | None] = (None, None)

    @property
    def alarms(self) -> list[dict]:
        return self.recorder.alarms if self.recorder is not None else []

    def on_train_begin(self, args, state, control, model: nn.Module = None, **kwargs) -> None:
        self.hook = model.register_forward_hook(self._keep_loss)
        self.recorder = TraceRecorder(model, RunFacts(
            model_name=type(model).__name__, dataset=self.dataset,
            num_classes=int(self.num_classes), steps=int(state.max_steps),
            loss_floor=float(self.loss_floor), device=next(model.parameters()).device.type),
            self.detectors)
        self.recorder.begin()

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self.losses = []

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, model=None,
                              **kwargs) -> None:
        self.recorder.before_step(optimizer, model.training)

    def on_step_end(self, args, state, control, **kwargs) -> None:
        if not self.losses:
            self.recorder.skip()
            return
        (val_loss, val_acc), self.validation = self.validation, (None, None)
        if self.recorder.record(torch.stack(self.losses).float().mean(), val_loss, val_acc) \
                and self.stop_on_alarm:
            control.should_training_stop = True

    def on_evaluate(self, args, state, control, metrics=None, **kwargs) -> None:
        metrics = metrics or {}
        self.validation = tuple(float(metrics[k]) if k in metrics else None
                                for k in ("eval_loss", "eval_accuracy"))

    def on_train_end(self, args, state, control, **kwargs) -> None:
        self.hook.remove()
        self.recorder.finish(self.trace)


class DetectorCallback(_KeepsLosses, TrainerCallback):
    """Runs a bugzoo detector (an instance or an installed detector's name) on each optimizer
    step of a ``transformers.Trainer``. The step's loss is read from the model's outputs in
    training (``outputs.loss``, or the first output), averaged over accumulated micro-batches.
    Each alarm becomes an entry of ``state.log_history`` (``{"bugzoo_alarm": ..., "step": ...}``,
    saved with the Trainer's state) and a warning, and is kept in :attr:`alarms`;
    ``stop_on_alarm`` ends training at the first one."""

    def __init__(self, detector: Detector | str, *, num_classes: int | None = None,
                 dataset: str = "", stop_on_alarm: bool = False):
        self.live = LiveWatch(detector)
        self.num_classes, self.dataset, self.stop_on_alarm = num_classes, dataset, stop_on_alarm
        self.losses: list[torch.Tensor] = []

    @property
    def alarms(self) -> list[Alarm]:
        return self.live.alarms

    def on_train_begin(self, args, state, control, model: nn.Module = None, optimizer=None,
                       lr_scheduler=None, **kwargs) -> None:
        self.hook = model.register_forward_hook(self._keep_loss)
        self.live.start(foreign_view(model, optimizer, num_classes=self.num_classes,
                                     steps=state.max_steps, dataset=self.dataset,
                                     lr_scheduler=lr_scheduler))

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        self.live.step_start()
        self.losses = []

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs) -> None:
        self.live.before_optimizer_step(optimizer)

    def on_step_end(self, args, state, control, model: nn.Module = None, **kwargs) -> None:
        if not self.losses:
            return
        loss = torch.stack(self.losses).float().mean()
        for alarm in self.live.after_step(state.global_step - 1, loss, model.training):
            state.log_history.append({"bugzoo_alarm": f"{self.live.name}: {alarm.symptom}: "
                                      f"{alarm.message}", "step": alarm.step})
            if self.stop_on_alarm:
                control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs) -> None:
        self.hook.remove()
        self.live.finish()


class TrainerCallbackDetector(CallbackDetector):
    """A ``transformers.TrainerCallback`` benchmarked as a bugzoo detector. Subclass it, set
    :attr:`callback` (the TrainerCallback class, or any function returning a fresh one) and
    register the subclass under the ``bugzoo.detectors`` entry-point group.

    Each step the callback is called as a Trainer calls it: ``on_step_begin``,
    ``on_pre_optimizer_step`` (the step's gradients are on the parameters),
    ``on_optimizer_step``, ``on_step_end``, then ``on_log`` with the step's ``loss``,
    ``grad_norm`` and ``learning_rate`` (as a Trainer logs them with ``logging_steps=1`` and
    ``logging_nan_inf_filter=False``: the step's own values); on evaluation steps ``on_evaluate`` with
    ``eval_loss`` and ``eval_accuracy``. What it raises, a ``control.should_training_stop``
    it sets and the anomalies it adds to the logs become alarms (see
    :class:`CallbackDetector`).
    """

    callback: Callable[[], TrainerCallback]

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.monitor = type(self).callback()
        self.folder = tempfile.TemporaryDirectory(prefix="bugzoo-hf-")
        self.args = TrainingArguments(output_dir=self.folder.name, max_steps=run.steps,
                                      report_to=[], use_cpu=run.device.type == "cpu")
        self.state = TrainerState(max_steps=run.steps, is_world_process_zero=True)
        self.control = TrainerControl()
        self._call(0, "on_init_end")
        self._call(0, "on_train_begin")

    def _call(self, step: int, event: str, **kwargs: Any) -> None:
        fn = getattr(self.monitor, event)
        self.guarded(step, event, lambda: fn(
            self.args, self.state, self.control, model=self.run.model,
            optimizer=self.run.optimizer, lr_scheduler=self.run.lr_scheduler, **kwargs))

    def observe(self, obs: Observation) -> list[Alarm]:
        step = obs.step
        self.state.global_step = step
        self._call(step, "on_step_begin")
        self._call(step, "on_pre_optimizer_step")
        self._call(step, "on_optimizer_step")
        self.state.global_step = step + 1  # as the Trainer counts it once the optimizer stepped
        self._call(step, "on_step_end")
        logs = {"loss": obs.loss, "grad_norm": obs.grad_norm, "learning_rate": obs.lr}
        self._call(step, "on_log", logs=logs)
        if obs.val_loss is not None:
            metrics = {"eval_loss": obs.val_loss, "eval_accuracy": obs.val_acc}
            self._call(step, "on_evaluate", metrics=metrics)
            logs.update(metrics)
        return self.verdict(step, logs, self.control.should_training_stop)

    def teardown(self) -> list[Alarm]:
        if hasattr(self, "monitor"):
            self._call(self.state.global_step, "on_train_end")
            self.folder.cleanup()
        return super().teardown()
