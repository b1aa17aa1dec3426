"""Lightning: the bugzoo trace of a ``lightning.Trainer`` fit, watched by the sealed detectors
(:class:`TraceCallback`, as :func:`bugzoo.watch` watches a plain loop); any one bugzoo detector
inside a fit (:class:`DetectorCallback`); and a Lightning ``Callback`` someone wrote as their
own monitor benchmarked as a bugzoo detector (:class:`LightningCallbackDetector`). Needs the
``lightning`` extra."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.integrations.live import CallbackDetector, LiveWatch, foreign_view, missing_extra
from bugzoo.integrations.recorder import DEFAULT_DETECTORS, TraceRecorder
from bugzoo.telemetry import Observation
from bugzoo.trace import RunFacts

try:
    import lightning.pytorch as pl
except ImportError as e:  # an optional extra: say which
    raise ImportError(missing_extra("lightning", "lightning")) from e


def _loss_of(outputs: torch.Tensor | Mapping[str, Any] | None) -> torch.Tensor | None:
    if isinstance(outputs, Mapping):
        outputs = outputs.get("loss")
    return outputs if isinstance(outputs, torch.Tensor) else None


def _planned_steps(trainer: pl.Trainer) -> int:
    steps = trainer.max_steps if trainer.max_steps > 0 else trainer.estimated_stepping_batches
    return int(min(steps, 2**31))


def _loss_scale(trainer: pl.Trainer) -> float | None:
    scaler = getattr(trainer.precision_plugin, "scaler", None)  # mixed precision's
    return scaler.get_scale() if scaler is not None else None


class TraceCallback(pl.Callback):
    """Writes the bugzoo trace of a fit (to the folder ``trace``, at its end) and streams it to
    the sealed ``detectors`` as it is made, as :func:`bugzoo.watch` does for a plain loop. The
    gradients are read at ``on_before_optimizer_step`` (after backward and any unscaling, before
    Lightning clips them), the loss at ``on_train_batch_end``, and the ``val_loss`` and
    ``val_acc`` the module logs join the next step's record. Each alarm is logged once and kept
    in :attr:`alarms`; ``stop_on_alarm`` ends the fit at the first one. ``num_classes`` (0 if
    not a classifier) and ``loss_floor`` are the run's facts, as :func:`bugzoo.watch` takes
    them. ``bugzoo check-trace`` rescores the folder to the same alarms."""

    def __init__(self, *, detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS,
                 num_classes: int = 0, loss_floor: float = 0.0, dataset: str | None = None,
                 trace: str | None = None, stop_on_alarm: bool = False):
        self.detectors, self.num_classes, self.dataset = detectors, num_classes, dataset
        self.loss_floor = loss_floor
        self.trace, self.stop_on_alarm = trace, stop_on_alarm
        self.recorder: TraceRecorder | None = None
        self.validation: tuple[float | None, float | None] = (None, None)

    @property
    def alarms(self) -> list[dict]:
        return self.recorder.alarms if self.recorder is not None else []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.recorder = TraceRecorder(pl_module, RunFacts(
            model_name=type(pl_module).__name__, dataset=self.dataset,
            num_classes=int(self.num_classes), steps=_planned_steps(trainer),
            loss_floor=float(self.loss_floor), device=pl_module.device.type), self.detectors)
        self.recorder.begin()
        self.stepped = trainer.global_step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.recorder.before_step(optimizer, pl_module.training)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.stepped:
            return  # no optimizer step in this batch (accumulating)
        self.stepped = trainer.global_step
        loss = _loss_of(outputs)
        if loss is None:
            self.recorder.skip()
            return
        (val_loss, val_acc), self.validation = self.validation, (None, None)
        if self.recorder.record(loss.detach(), val_loss, val_acc, _loss_scale(trainer)) and \
                self.stop_on_alarm:
            trainer.should_stop = True

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            metrics = trainer.callback_metrics
            self.validation = tuple(float(metrics[k]) if k in metrics else None
                                    for k in ("val_loss", "val_acc"))

    def on_fit_end(self, trainer, pl_module) -> None:
        self.recorder.finish(self.trace)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self.recorder is not None:
            self.recorder.finish(self.trace)


class DetectorCallback(pl.Callback):
    """Runs a bugzoo detector (an instance or an installed detector's name) on each optimizer
    step of a Lightning fit. Each alarm is logged as the metric ``bugzoo/<detector>`` (the
    alarms so far, on the step it came) and as a warning, and kept in :attr:`alarms`;
    ``stop_on_alarm`` ends the fit at the first one. ``num_classes`` and ``dataset`` fill the
    detector's RunView (a detector that reads the expected first loss needs ``num_classes``).
    """

    def __init__(self, detector: Detector | str, *, num_classes: int | None = None,
                 dataset: str = "", stop_on_alarm: bool = False):
        self.live = LiveWatch(detector)
        self.num_classes, self.dataset, self.stop_on_alarm = num_classes, dataset, stop_on_alarm
        self.stepped = -1  # global_step seen at the last Observation

    @property
    def alarms(self) -> list[Alarm]:
        return self.live.alarms

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        schedulers = trainer.lr_scheduler_configs
        self.live.start(foreign_view(
            pl_module, trainer.optimizers[0] if trainer.optimizers else None,
            num_classes=self.num_classes, steps=_planned_steps(trainer), dataset=self.dataset,
            lr_scheduler=schedulers[0].scheduler if schedulers else None))
        self.stepped = trainer.global_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.live.step_start()

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.live.before_optimizer_step(optimizer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = _loss_of(outputs)
        if trainer.global_step == self.stepped or loss is None:
            return  # no optimizer step in this batch (accumulating), or nothing to observe
        self.stepped = trainer.global_step
        if self.live.after_step(trainer.global_step - 1, loss, pl_module.training,
                                _loss_scale(trainer)):
            pl_module.log(f"bugzoo/{self.live.name}", float(len(self.alarms)), on_step=True,
                          on_epoch=False)
            if self.stop_on_alarm:
                trainer.should_stop = True

    def on_fit_end(self, trainer, pl_module) -> None:
        self.live.finish()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.live.finish()


class _MonitoredModule(pl.LightningModule):
    """The run's model as a LightningModule, for a callback written against one: it holds the
    model (parameters under ``model.``) and keeps what the callback logs."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.logged: dict[str, float] = {}

    def forward(self, *inputs):
        return self.model(*inputs)

    def log(self, name: str, value, *args, **kwargs) -> None:
        self.logged[name] = float(value)

    def log_dict(self, dictionary: Mapping[str, Any], *args, **kwargs) -> None:
        for name, value in dictionary.items():
            self.log(name, value)


class LightningCallbackDetector(CallbackDetector):
    """A Lightning ``Callback`` benchmarked as a bugzoo detector. Subclass it, set
    :attr:`callback` (the Callback class, or any function returning a fresh Callback) and
    register the subclass under the ``bugzoo.detectors`` entry-point group.

    Each step the callback is called as a Trainer calls it: ``on_train_batch_start``,
    ``on_before_optimizer_step`` (the step's gradients are on the parameters), then
    ``on_train_batch_end`` with the loss; on evaluation steps ``val_loss`` and ``val_acc``
    join ``trainer.callback_metrics`` and ``on_validation_end`` follows. What it raises, a
    ``trainer.should_stop`` it sets and the anomalies it logs through ``pl_module.log`` become
    alarms (see :class:`CallbackDetector`). The callback sees a stand-in Trainer: the
    attributes callbacks commonly read (``global_step``, ``callback_metrics``, ``optimizers``,
    ``should_stop``, ...).
    """

    callback: Callable[[], pl.Callback]

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.monitor = type(self).callback()
        self.module = _MonitoredModule(run.model)
        self.trainer = SimpleNamespace(
            global_step=0, current_epoch=0, callback_metrics={}, logged_metrics={},
            progress_bar_metrics={}, optimizers=[run.optimizer], should_stop=False,
            max_steps=run.steps, estimated_stepping_batches=run.steps, sanity_checking=False,
            training=True, is_global_zero=True, world_size=1, lightning_module=self.module,
            logger=None, loggers=[], callbacks=[self.monitor])
        for hook in ("setup", "on_fit_start", "on_train_start"):
            args = ("fit",) if hook == "setup" else ()
            self._call(0, hook, *args)

    def _call(self, step: int, hook: str, *args) -> None:
        fn = getattr(self.monitor, hook)
        self.guarded(step, hook, lambda: fn(self.trainer, self.module, *args))

    def observe(self, obs: Observation) -> list[Alarm]:
        trainer, step = self.trainer, obs.step
        trainer.global_step = step
        trainer.callback_metrics.update(loss=torch.tensor(obs.loss),
                                        train_loss=torch.tensor(obs.loss))
        self.module.logged = {}
        self._call(step, "on_train_batch_start", None, step)
        self._call(step, "on_before_optimizer_step", self.run.optimizer)
        trainer.global_step = step + 1  # as Lightning counts it once the optimizer stepped
        self._call(step, "on_train_batch_end", {"loss": torch.tensor(obs.loss)}, None, step)
        if obs.val_loss is not None:
            trainer.callback_metrics.update(val_loss=torch.tensor(obs.val_loss),
                                            val_acc=torch.tensor(obs.val_acc))
            self._call(step, "on_validation_end")
        trainer.logged_metrics.update(self.module.logged)
        return self.verdict(step, self.module.logged, trainer.should_stop)

    def teardown(self) -> list[Alarm]:
        if hasattr(self, "monitor"):
            for hook in ("on_train_end", "on_fit_end"):
                self._call(self.trainer.global_step, hook)
            self._call(self.trainer.global_step, "teardown", "fit")
        return super().teardown()
