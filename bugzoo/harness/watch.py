"""Detectors inside a run: the view they get, and each detector's calls timed, cut off at its
budget (:mod:`bugzoo.harness.budget`) and isolated so that its failures never sink the run.

Shared by the in-process runner and the distributed runner (each rank builds its own
:class:`Watch` objects), so neither imports the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bugzoo.detector import Detector, RunView
from bugzoo.detector_registry import DETECTORS
from bugzoo.harness.budget import CLOCK, TimeBudget
from bugzoo.harness.record import DetectorStatus
from bugzoo.telemetry import Observation
from bugzoo.train import Trainer, loss_floor

log = logging.getLogger(__name__)


def run_view(trainer: Trainer, twin_losses: list[float] | None = None) -> RunView:
    """The detector-facing view of a built trainer (no bug identity in it)."""
    return RunView(model=trainer.model, optimizer=trainer.optimizer, loss_fn=trainer.loss_fn,
                   train_loader=trainer.train_loader, val_loader=trainer.val_loader,
                   device=trainer.device, steps=trainer.steps, model_name=trainer.cfg.model.name,
                   lr_scheduler=trainer.scheduler, twin_losses=twin_losses,
                   **run_facts(trainer))


def run_facts(trainer: Trainer) -> dict:
    """The RunView's plain facts that a run's summary keeps for replay (``num_classes``,
    ``dataset``, ``loss_floor``), from a trainer that may have crashed while building (then
    two classes, no dataset and a floor of 0). They come from the run's clean configuration,
    as a user knows them of their own loop, never from the planted code path: a bug in the
    loss function must not move the floor the detectors are told is attainable."""
    if not hasattr(trainer, "data"):
        return {"num_classes": 2, "dataset": None, "loss_floor": 0.0}
    num_classes = trainer.data.num_classes
    return {"num_classes": num_classes, "dataset": trainer.cfg.data.name,
            "loss_floor": loss_floor(trainer.cfg.loss.label_smoothing, num_classes)}


class Watch:
    """Runs one detector inside a run: timed, cut off after ``budget_s`` per call, and isolated
    so its errors or hangs never sink the run (the first one is recorded, later calls skipped)."""

    def __init__(self, detector: Detector, budget_s: float | None = None):
        self.detector = detector
        self.budget_s = budget_s
        self.budget = TimeBudget(budget_s)
        self.alarms: list[dict] = []
        self.seconds = 0.0
        self.error: str | None = None

    def call(self, method: str, *args) -> None:
        """Call the detector's ``method``; keep its alarms. After its first failure it is torn
        down at once (its hooks removed, global modes it set restored) and never called
        again, so a run, or a reused worker, does not carry a broken detector along."""
        if self.error is not None:
            return
        t0 = time.perf_counter()
        try:
            self._keep(self._call(method, *args))
        except Exception as e:
            self.error = f"{method}: {type(e).__name__}: {e}"
            # recorded in the run's status; a sweep sums them up in one line per detector
            log.info("detector %s failed in %s", self.detector.name, self.error)
            if method != "teardown":
                self._tear_down_after_failure()
        finally:
            self.seconds += time.perf_counter() - t0

    def _call(self, method: str, *args):
        with self.budget:
            return getattr(self.detector, method)(*args) or []

    def _keep(self, raised) -> None:
        for a in raised:
            self.alarms.append({"detector": self.detector.name, "step": a.step,
                                "symptom": a.symptom, "category": a.category,
                                "message": a.message})

    def _tear_down_after_failure(self) -> None:
        try:
            self._keep(self._call("teardown"))
        except Exception as e:  # the error already recorded is the one that counts
            log.debug("detector %s failed in teardown too: %s", self.detector.name, e)

    def status(self, wall_s: float) -> DetectorStatus:
        hook_s = getattr(self.detector, "hook_seconds", 0.0)
        hook_errors = getattr(self.detector, "hook_errors", [])
        seconds = self.seconds + hook_s
        name = self.detector.name
        distribution, version = (DETECTORS.provider(name) if name in DETECTORS
                                 else ("unknown", ""))
        return DetectorStatus(error=self.error or (hook_errors[0] if hook_errors else None),
                              seconds=seconds,
                              call_share=seconds / wall_s if wall_s > 0 else 0.0,
                              alarms=len(self.alarms), role=self.detector.role,
                              scope=self.detector.scope,
                              distribution=distribution, version=version)


def call_all(watches: list[Watch], method: str, *args) -> None:
    """Call ``method`` on every watch in turn (a round), each call under its own time budget,
    with the budget's timer armed once for the round and disarmed after it, so that it never
    fires into the training step itself."""
    for w in watches:
        w.call(method, *args)
    CLOCK.rest()


def observer(watches: list[Watch]) -> Callable[[Observation], None]:
    """The per-step callback the training loop calls with each Observation: one round of
    ``observe`` calls (:func:`call_all`)."""
    return lambda obs: call_all(watches, "observe", obs)


def watches_for(detectors: list[Detector], cfg) -> list[Watch]:
    """One Watch per detector with the run's per-call budget (``harness.detector_budget_s``)."""
    budget_s = cfg.harness.get("detector_budget_s", 10.0)
    return [Watch(d, budget_s) for d in detectors]
