"""Detectors inside a run: the view they get, their time budget, and isolation of their failures.

Shared by the in-process runner and the distributed runner (each rank builds its own
:class:`Watch` objects), so neither imports the other.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from omegaconf import DictConfig

from bugzoo.bugs import Bug
from bugzoo.detector import Detector, RunView, installed_detectors, provider
from bugzoo.harness.record import DetectorStatus
from bugzoo.telemetry import Observation
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


_deadline: float | None = None  # when the budgeted call must end (perf_counter), None outside
_budget_s = 0.0  # that call's budget, for the message
_timer_due = 0.0  # when the armed interval timer fires (perf_counter); 0.0 while disarmed
_scopes = 0  # open budget_scope blocks: while one is, the handler and the timer stay in place


def _on_alarm(signum, frame):
    """Raise in a call past its deadline; re-arm for one that has time left; between calls,
    let the timer rest until the next call arms it."""
    global _timer_due
    _timer_due = 0.0
    if _deadline is None:
        return
    left = _deadline - time.perf_counter()
    if left <= 0:
        raise DetectorTimeout(f"exceeded its time budget of {_budget_s:g} s per call")
    _arm(left)


def _arm(seconds: float) -> None:
    global _timer_due
    _timer_due = time.perf_counter() + seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm() -> None:
    global _timer_due
    _timer_due = 0.0
    signal.setitimer(signal.ITIMER_REAL, 0)


def _usable() -> bool:
    """SIGALRM budgets work only in the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.get_ident() == threading.main_thread().ident


@contextmanager
def budget_scope() -> Iterator[None]:
    """Keep the time budget's SIGALRM handler installed for a block of many budgeted calls (a
    run's detector calls). A call inside it only notes its deadline, arming the interval timer
    when the timer is not already due by then; the handler raises only in a call past its
    deadline (re-arming for one with time left), so a round of calls in a row pays one arming
    (see :func:`call_all`) instead of two timer system calls per call (46 a step with 23
    detectors; mlp suite 1.64x -> 1.60x). The timer is disarmed and the previous handler put
    back at the end; a handler that code inside the block installs for
    itself would receive the budget's alarms."""
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
        if not _scopes:
            _disarm()
        signal.signal(signal.SIGALRM, previous)


class TimeBudget:
    """``with TimeBudget(seconds):`` raises :class:`DetectorTimeout` inside the block once
    ``seconds`` have passed.

    Uses SIGALRM, so it only works in the main thread of a POSIX process; elsewhere (or with
    no budget) the block runs unbounded. A budget set around a block already under a budget is
    not nested: the inner one wins for its duration. Inside :func:`budget_scope` the handler
    and the timer are already in place, and entering only notes the deadline (arming the
    timer when it would fire after it); outside, both are set up for the block and removed
    after. A class rather than a generator: it wraps every detector call, and costs half as
    much; one instance may be entered again and again.
    """

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.bounded = bool(seconds and seconds > 0)
        self.armed = False
        self.previous = None

    def __enter__(self) -> None:
        global _deadline, _budget_s
        self.armed = self.bounded and _usable()
        if not self.armed:
            return
        self.previous = None if _scopes else (signal.signal(signal.SIGALRM, _on_alarm),)
        _budget_s = self.seconds
        _deadline = time.perf_counter() + self.seconds
        if not _timer_due or _timer_due > _deadline:
            _arm(self.seconds)

    def __exit__(self, *exc) -> None:
        global _deadline
        if self.armed:
            _deadline = None
            if self.previous is not None:
                _disarm()
                signal.signal(signal.SIGALRM, self.previous[0])


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
            log.warning("detector %s failed in %s", self.detector.name, self.error)
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
        distribution, version = (provider(name) if name in installed_detectors()
                                 else ("unknown", ""))
        return DetectorStatus(error=self.error or (hook_errors[0] if hook_errors else None),
                              seconds=seconds,
                              call_share=seconds / wall_s if wall_s > 0 else 0.0,
                              alarms=len(self.alarms), role=self.detector.role,
                              distribution=distribution, version=version)


def call_all(watches: list[Watch], method: str, *args) -> None:
    """Call ``method`` on every watch in turn (a round), each call under its own time budget,
    with the budget's timer armed once for the round and disarmed after it (two timer calls a
    round, however many detectors), so that it never fires into the training step itself."""
    for w in watches:
        w.call(method, *args)
    if _timer_due:
        _disarm()


def observer(watches: list[Watch]) -> Callable[[Observation], None]:
    """The per-step callback the training loop calls with each Observation: one round of
    ``observe`` calls (:func:`call_all`)."""
    return lambda obs: call_all(watches, "observe", obs)


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
