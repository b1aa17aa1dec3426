"""Detectors inside a run: the view they get, their time budget, and isolation of their failures.

Shared by the in-process runner and the distributed runner (each rank builds its own
:class:`Watch` objects), so neither imports the other.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from omegaconf import DictConfig

from bugzoo.bugs import Bug
from bugzoo.detector import Detector, RunView, installed_detectors, provider
from bugzoo.harness.record import DetectorStatus
from bugzoo.train import Trainer, loss_floor, rng_states_kept

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
    two classes, no dataset and a floor of 0)."""
    if not hasattr(trainer, "data"):
        return {"num_classes": 2, "dataset": None, "loss_floor": 0.0}
    num_classes = trainer.data.num_classes
    return {"num_classes": num_classes, "dataset": trainer.data.name,
            "loss_floor": loss_floor(getattr(trainer, "loss_fn", None), num_classes)}


class DetectorTimeout(Exception):
    """A detector call ran past its time budget."""


_armed_s = 0.0  # the budget the interval timer was last armed with
_scopes = 0  # open budget_scope blocks: while one is, the handler stays installed


def _on_alarm(signum, frame):
    raise DetectorTimeout(f"exceeded its time budget of {_armed_s:g} s per call")


def _usable(seconds: float | None = 1.0) -> bool:
    """SIGALRM budgets work only in the main thread of a POSIX process."""
    return bool(seconds and seconds > 0 and hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread())


@contextmanager
def budget_scope() -> Iterator[None]:
    """Keep the time budget's SIGALRM handler installed for a block of many budgeted calls (a
    run's detector calls), so each call only arms and disarms the timer: about 3 us a call
    instead of 8 (swapping a signal handler costs 5), which for 23 detectors on the mlp's
    0.9-ms step is 0.13 of a step. The previous handler is put back at the end; a handler that
    code inside the block installs for itself would receive the budget's alarms."""
    global _scopes
    if not _usable():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    _scopes += 1
    try:
        yield
    finally:
        _scopes -= 1
        signal.signal(signal.SIGALRM, previous)


class TimeBudget:
    """``with TimeBudget(seconds):`` raises :class:`DetectorTimeout` inside the block once
    ``seconds`` have passed.

    Uses SIGALRM, so it only works in the main thread of a POSIX process; elsewhere (or with
    no budget) the block runs unbounded. A budget set around a block already under a budget is
    not nested: the inner one wins for its duration. Inside :func:`budget_scope` the handler
    is already in place; outside it, it is installed for the block and removed after. A class
    rather than a generator: it wraps every detector call, and costs half as much.
    """

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.armed = False
        self.previous = None

    def __enter__(self) -> None:
        global _armed_s
        self.armed = _usable(self.seconds)
        if not self.armed:
            return
        self.previous = None if _scopes else (signal.signal(signal.SIGALRM, _on_alarm),)
        _armed_s = self.seconds
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if self.previous is not None:
                signal.signal(signal.SIGALRM, self.previous[0])


class Watch:
    """Runs one detector inside a run: timed, cut off after ``budget_s`` per call, and isolated
    so its errors or hangs never sink the run (the first one is recorded, later calls skipped)."""

    def __init__(self, detector: Detector, budget_s: float | None = None):
        self.detector = detector
        self.budget_s = budget_s
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
            log.warning("detector %s failed in %s", self.detector.name, self.error)
            if method != "teardown":
                self._tear_down_after_failure()
        finally:
            self.seconds += time.perf_counter() - t0

    def _call(self, method: str, *args):
        with TimeBudget(self.budget_s):
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

    def observer(self):
        """The per-step callback the training loop calls with each Observation."""
        return lambda obs: self.call("observe", obs)

    def status(self, wall_s: float) -> DetectorStatus:
        hook_s = getattr(self.detector, "hook_seconds", 0.0)
        hook_errors = getattr(self.detector, "hook_errors", [])
        seconds = self.seconds + hook_s
        name = self.detector.name
        distribution, version = (provider(name) if name in installed_detectors()
                                 else ("unknown", ""))
        return DetectorStatus(error=self.error or (hook_errors[0] if hook_errors else None),
                              seconds=seconds,
                              call_share=seconds / wall_s if wall_s > 0 else 0.0,
                              alarms=len(self.alarms), role=self.detector.role,
                              distribution=distribution, version=version)


def watches_for(detectors: list[Detector], cfg) -> list[Watch]:
    """One Watch per detector with the run's per-call budget (``harness.detector_budget_s``)."""
    budget_s = cfg.harness.get("detector_budget_s", 10.0)
    return [Watch(d, budget_s) for d in detectors]


def twin_losses(cfg: DictConfig, bug: Bug | None, steps: int,
                budget_s: float | None = None) -> list[float]:
    """Train a fresh copy of the run ``cfg`` describes (same seed, same planted bug) for
    ``steps`` steps with nothing watching; its training losses, fewer if it crashes or runs
    past ``budget_s`` seconds (a run that hangs early must reach the watched run, where the
    watchdog sees it, not hang in its twin). The RNG states are left as they were, so the run
    that follows is not changed by its twin."""
    rows: list[dict] = []
    with rng_states_kept():
        twin = Trainer(cfg, bug)
        try:
            with TimeBudget(budget_s):
                twin.build().fit(rows=rows, steps=min(steps, twin.steps))
        except DetectorTimeout:
            log.warning("twin run cut off after %g s, at %d of %d steps", budget_s, len(rows),
                        steps)
        except Exception as e:  # the watched run will meet the same crash and record it
            log.debug("twin run stopped: %s: %s", type(e).__name__, e)
    return [row["loss"] for row in rows]


def twin_for(watches: list[Watch], cfg: DictConfig, bug: Bug | None) -> list[float] | None:
    """The twin run's losses for the watching detectors that ask for one
    (``Detector.twin_steps``), as many steps as the most any asks for, under the longest of
    their time budgets and its time charged to each of them; None when none asks."""
    asking = [w for w in watches if w.detector.twin_steps > 0]
    if not asking:
        return None
    budgets = [w.budget_s for w in asking]
    budget_s = None if None in budgets else max(budgets)
    t0 = time.perf_counter()
    losses = twin_losses(cfg, bug, max(w.detector.twin_steps for w in asking), budget_s)
    for w in asking:
        w.seconds += time.perf_counter() - t0
    return losses
