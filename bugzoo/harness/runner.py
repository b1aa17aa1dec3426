"""Execute one run: build, plant the bug, train while detectors watch, summarise, store."""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig

from bugzoo.bugs import Bug, get_bug
from bugzoo.config import resolved, scenario_id
from bugzoo.detector import Detector, RunView
from bugzoo.harness import store
from bugzoo.summary import summarize
from bugzoo.train import Trainer, measure

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """Everything one run produced."""

    config: dict
    trace: pd.DataFrame
    alarms: pd.DataFrame
    summary: dict
    trainer: Any = field(default=None, repr=False)  # the built Trainer (for inspection)


def run_scenario_id(cfg: DictConfig) -> str:
    """``<model>-<bug>`` / ``<model>-clean``; the clean control of a buggy scenario (its
    settings with the bug removed) is ``<scenario>.control``."""
    derived = scenario_id(cfg.model.name, cfg.bug.id if cfg.get("bug") else None)
    named = cfg.get("scenario")
    if not named or named == derived:
        return derived
    return f"{named}.control" if cfg.get("bug") is None else named


def run_view(trainer: Trainer) -> RunView:
    """The detector-facing view of a built trainer (no bug identity in it)."""
    return RunView(model=trainer.model, optimizer=trainer.optimizer, loss_fn=trainer.loss_fn,
                   train_loader=trainer.train_loader, val_loader=trainer.val_loader,
                   device=trainer.device, num_classes=trainer.data.num_classes,
                   steps=trainer.steps, model_name=trainer.cfg.model.name,
                   dataset=trainer.data.name, lr_scheduler=trainer.scheduler)


class DetectorTimeout(Exception):
    """A detector call ran past its time budget."""


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Raise :class:`DetectorTimeout` inside the block once ``seconds`` have passed.

    Uses SIGALRM, so it only works in the main thread of a POSIX process; elsewhere (or with
    no budget) the block runs unbounded. A budget set around a block already under a budget is
    not nested: the inner one wins for its duration.
    """
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise DetectorTimeout(f"exceeded its time budget of {seconds:g} s per call")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
        if self.error is not None:
            return
        t0 = time.perf_counter()
        try:
            with time_budget(self.budget_s):
                raised = getattr(self.detector, method)(*args) or []
            for a in raised:
                self.alarms.append({"detector": self.detector.name, "step": a.step,
                                    "symptom": a.symptom, "category": a.category,
                                    "message": a.message})
        except Exception as e:
            self.error = f"{method}: {type(e).__name__}: {e}"
            log.warning("detector %s failed in %s", self.detector.name, self.error)
        finally:
            self.seconds += time.perf_counter() - t0

    def status(self, wall_s: float) -> dict:
        hook_s = getattr(self.detector, "hook_seconds", 0.0)
        hook_errors = getattr(self.detector, "hook_errors", [])
        return {"error": self.error or (hook_errors[0] if hook_errors else None),
                "seconds": self.seconds + hook_s,
                "overhead": (self.seconds + hook_s) / wall_s if wall_s > 0 else 0.0,
                "alarms": len(self.alarms)}


def execute(cfg: DictConfig, detectors: list[Detector] = (), bug: Bug | None = None
            ) -> RunResult:
    """Train one run with ``detectors`` watching; a crash is recorded, not raised.

    ``bug`` plants a Bug object directly instead of looking ``cfg.bug.id`` up (the conformance
    suite plants decoys this way)."""
    if bug is None and cfg.get("bug"):
        bug = get_bug(cfg.bug.id)
    from bugzoo import distributed  # imports this module: import here, not at the top

    if distributed.is_distributed(cfg, bug):
        return distributed.execute_distributed(cfg, detectors, bug)
    torch.set_num_threads(int(cfg.harness.threads))
    watches = [Watch(d, cfg.harness.get("detector_budget_s", 10.0)) for d in detectors]
    trainer = Trainer(cfg, bug)
    start = time.perf_counter()
    trace, outcome, error = pd.DataFrame(), "completed", None
    try:
        trainer.build()
        for w in watches:
            w.call("setup", run_view(trainer))
        rows: list[dict] = []
        trace = trainer.fit([lambda obs, w=w: w.call("observe", obs) for w in watches],
                            rows=rows)
    except Exception as e:
        outcome, error = "crashed", f"{type(e).__name__}: {e}"
        trace = pd.DataFrame(rows) if "rows" in locals() else pd.DataFrame()
        log.info("run crashed: %s\n%s", error, traceback.format_exc(limit=3))
    finally:
        for w in watches:
            w.call("teardown")
    wall_s = time.perf_counter() - start
    summary = summarize(trace, trainer.data.num_classes if hasattr(trainer, "data") else 2)
    if outcome == "completed":
        holdout_loss, holdout_acc = measure(trainer.model, trainer.data.holdout, trainer.device)
        summary.update(holdout_loss=holdout_loss, holdout_acc=holdout_acc,
                       val_holdout_gap=summary["final_val_acc"] - holdout_acc)
    summary.update(
        scenario=run_scenario_id(cfg),
        model=cfg.model.name, data=cfg.data.name, bug=bug.id if bug else None,
        category=bug.category if bug else None, loud=bug.loud if bug else False,
        onset=trainer.onset if bug else None, seed=int(cfg.seed), steps=trainer.steps,
        outcome=outcome, crashed=outcome == "crashed", hung=False, error=error,
        wall_s=wall_s, device=str(trainer.device), torch_version=torch.__version__,
        detectors={w.detector.name: w.status(wall_s) for w in watches})
    alarms = pd.DataFrame([a for w in watches for a in w.alarms], columns=store.ALARM_COLUMNS)
    return RunResult(resolved(cfg), trace, alarms, summary, trainer=trainer)


def execute_and_store(cfg: DictConfig, root, sweep: str,
                      detectors: list[Detector] = ()) -> tuple[RunResult, str]:
    result = execute(cfg, detectors)
    path = store.run_dir(root, sweep, result.summary["scenario"], int(cfg.seed))
    store.write_run(path, result.config, result.trace, result.alarms, result.summary)
    return result, str(path)



