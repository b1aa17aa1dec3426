"""Execute one run: build, plant the bug, train while detectors watch, summarise, store."""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field

import pandas as pd
import torch
from omegaconf import DictConfig

from bugzoo.bugs import get_bug
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
    detector_status: dict = field(default_factory=dict)


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


class Watch:
    """Runs one detector inside a run: timed, and isolated so its errors never sink the run."""

    def __init__(self, detector: Detector):
        self.detector = detector
        self.alarms: list[dict] = []
        self.seconds = 0.0
        self.error: str | None = None

    def call(self, method: str, *args) -> None:
        if self.error is not None:
            return
        t0 = time.perf_counter()
        try:
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


def execute(cfg: DictConfig, detectors: list[Detector] = ()) -> RunResult:
    """Train one run with ``detectors`` watching; a crash is recorded, not raised."""
    torch.set_num_threads(int(cfg.harness.threads))
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    watches = [Watch(d) for d in detectors]
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
    return RunResult(resolved(cfg), trace, alarms, summary)


def execute_and_store(cfg: DictConfig, root, sweep: str,
                      detectors: list[Detector] = ()) -> tuple[RunResult, str]:
    result = execute(cfg, detectors)
    path = store.run_dir(root, sweep, result.summary["scenario"], int(cfg.seed))
    store.write_run(path, result.config, result.trace, result.alarms, result.summary)
    return result, str(path)



