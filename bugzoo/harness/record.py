"""The run record: what one run leaves behind, ``summary.json`` above all.

:func:`summarize` computes the metrics of a trace (the fields that symptom checks compare);
:func:`build_summary` assembles every key of ``summary.json``, for in-process runs, distributed
runs and runs whose process died without a word alike; :class:`DetectorStatus` says how one
detector fared in a run.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig

from bugzoo import cpu_model, release
from bugzoo.bugs import Bug
from bugzoo.harness.honeypot import TAG as HONEYPOT_TAG
from bugzoo.scenarios import get_scenario, scenario_id
from bugzoo.telemetry import TIMING_COLUMNS


@dataclass
class DetectorStatus:
    """How one detector fared in one run.

    ``error``: the first exception or time-budget overrun in one of its calls or hooks (the
    detector is not called again after one); ``seconds``: time spent inside its calls and hooks;
    ``call_share``: that time as a share of the run's wall time (not what a user pays per step:
    a tool can slow the whole step, see ``bugzoo results perf overhead``); ``alarms``: how many it
    raised; ``role``, ``scope``, ``distribution``, ``version``: what it is, what it watches
    and which installed distribution provided it.
    """

    error: str | None = None
    seconds: float = 0.0
    call_share: float = 0.0
    alarms: int = 0
    role: str = "heuristic"
    scope: str = "generic"
    distribution: str = "unknown"
    version: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunResult:
    """Everything one run produced: the resolved config, the trace (one row per step), the
    alarms (``store.ALARM_COLUMNS``), the summary (:func:`build_summary`) and the per-layer
    gradient norms (``telemetry.LAYER_COLUMNS``)."""

    config: dict
    trace: pd.DataFrame
    alarms: pd.DataFrame
    summary: dict
    layers: pd.DataFrame | None = None
    trainer: Any = field(default=None, repr=False)  # the built Trainer (for inspection)


@dataclass
class PartialRun:
    """What a run has made so far, filled in by the runner as it goes: the trace rows and the
    detectors' watches. A watchdog that gives up on a hung run stores these."""

    rows: list[dict] = field(default_factory=list)
    watches: list = field(default_factory=list)


def trace_digest(trace: pd.DataFrame) -> str:
    """A hash of every non-timing trace column: equal digests mean bitwise-equal traces."""
    stable = trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace.columns])
    return hashlib.sha256(pd.util.hash_pandas_object(stable, index=True).values.tobytes()
                          ).hexdigest()[:16]


def _present(values: np.ndarray) -> np.ndarray:
    return values[~np.isnan(values)]


def _median(values: np.ndarray) -> float:
    """pandas' ``Series.median()``: the median of the values that are not NaN."""
    present = _present(values)
    return float(np.median(present)) if present.size else math.nan


def _filled(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The values with NaN as 0 and how many were not NaN: how pandas sums, keeping positions
    (so that pairwise summation groups the numbers as pandas does)."""
    missing = np.isnan(values)
    return np.where(missing, 0.0, values), int(values.size - missing.sum())


def _mean(values: np.ndarray) -> float:
    """pandas' ``Series.mean()``."""
    filled, count = _filled(values)
    return float(filled.sum(dtype=np.float64) / count) if count else math.nan


def _std(values: np.ndarray) -> float:
    """pandas' ``Series.std()`` (ddof 1, NaN skipped), by its own steps."""
    filled, count = _filled(values)
    if count < 2:
        return math.nan
    centred = (filled.sum(dtype=np.float64) / count - filled) ** 2
    centred[np.isnan(values)] = 0
    return float(np.sqrt(centred.sum(dtype=np.float64) / (count - 1)))


def _max(values: np.ndarray) -> float:
    """pandas' ``Series.max()``."""
    present = _present(values)
    return float(present.max()) if present.size else math.nan


def summarize(trace: pd.DataFrame, num_classes: int | None) -> dict:
    """Scalar metrics of a completed (or partial) trace. The columns are read once as arrays
    and reduced as pandas reduces a Series (NaN skipped, summed in place), so the values are
    pandas' to the last bit at a fraction of its per-call cost."""
    expected = math.log(num_classes) if num_classes else math.nan
    if trace.empty:
        return {"steps_completed": 0, "expected_initial_loss": expected}
    column = {name: trace[name].to_numpy(dtype=np.float64, na_value=np.nan) for name in (
        "loss", "val_loss", "val_acc", "grad_norm", "zero_grad_frac", "update_ratio",
        "param_norm", "lr", "training", "rss_mb", "heap_mb", "data_s", "step_s")}
    loss = column["loss"]
    finite = np.isfinite(loss)
    evaluated = ~np.isnan(column["val_acc"])
    val_loss, val_acc = column["val_loss"][evaluated], column["val_acc"][evaluated]
    nonfinite_steps = trace["step"].to_numpy()[~finite]
    early, late = loss[: max(1, len(loss) // 10)], loss[-max(1, len(loss) // 5):]
    grad_norm, rss, heap = column["grad_norm"], column["rss_mb"], column["heap_mb"]
    filled_data, _ = _filled(column["data_s"])
    filled_step, _ = _filled(column["step_s"])
    return {
        "steps_completed": int(len(trace)),
        "initial_loss": float(loss[0]),
        "expected_initial_loss": expected,
        "final_loss": _median(_present(loss)[-10:]),
        "min_loss": float(loss[finite].min()) if finite.any() else math.nan,
        "loss_drop": float(_median(early) - _median(late)),
        "late_loss_std": _std(late) if len(late) > 1 else 0.0,
        "final_val_loss": float(val_loss[-1]) if len(val_loss) else math.nan,
        # the untrained model's validation loss, when the run evaluates before training
        # (harness.eval_at_start: the first row holds it)
        "initial_val_loss": float(column["val_loss"][0])
        if not np.isnan(column["val_loss"][0]) else math.nan,
        "final_val_acc": float(val_acc[-1]) if len(val_acc) else math.nan,
        "best_val_acc": _max(val_acc) if len(val_acc) else math.nan,
        "nonfinite": bool((~finite).any() or (trace["nonfinite_grads"].to_numpy() > 0).any()),
        "first_nonfinite_step": int(nonfinite_steps[0]) if len(nonfinite_steps) else None,
        "max_grad_norm": _max(grad_norm),
        "median_grad_norm": _median(grad_norm),
        "final_grad_norm": _median(_present(grad_norm)[-10:]),
        "mean_zero_grad_frac": _mean(column["zero_grad_frac"]),
        "mean_update_ratio": _mean(column["update_ratio"]),
        "final_param_norm": float(column["param_norm"][-1]),
        "final_lr": float(column["lr"][-1]),
        "max_lr": _max(column["lr"]),
        "mean_lr": _mean(column["lr"]),
        "train_mode_frac": _mean(column["training"]),
        "peak_rss_mb": _max(rss),
        "rss_growth_mb": float(_median(rss[-10:]) - _median(rss[:10])),
        # live heap at the end vs after the first steps (optimizer state exists by then)
        "heap_growth_mb": float(_median(heap[-10:]) - _median(heap[5:15])),
        "data_time_frac": float(filled_data.sum() / max(filled_step.sum(), 1e-9)),
        "median_step_s": _median(column["step_s"]),
        "trace_digest": trace_digest(trace),
    }


def scenario_of(cfg: DictConfig) -> str:
    """The scenario id a run is stored under: the composed ``scenario`` (``<model>-<bug>`` or
    ``<model>-clean`` for a run composed without one); a buggy scenario run with its bug
    removed (``~bug``) is ``<scenario>.control``."""
    named = cfg.get("scenario")
    if not named:
        return scenario_id(cfg.model.name, cfg.bug.id if cfg.get("bug") else None)
    removed = cfg.get("bug") is None and not get_scenario(named).clean
    return f"{named}.control" if removed else named


def build_summary(cfg: DictConfig, bug: Bug | None, *, armed: bool = True,
                  trace: pd.DataFrame, outcome: str,
                  error: str | None, wall_s: float, detectors: dict[str, DetectorStatus],
                  startup_s: float | None = None,
                  num_classes: int | None = None, dataset: str | None = None,
                  loss_floor: float = 0.0, holdout: tuple[float, float] | None = None,
                  padding: list[dict] | None = None, generation: dict | None = None,
                  entropy_floor: float | None = None, device: str | None = None,
                  world_size: int = 1, backend: str | None = None,
                  rank_errors: list | None = None,
                  rank_param_divergence: float | None = None,
                  setup_digest: str | None = None, honeypot: bool = False) -> dict:
    """Every key of a run's ``summary.json``: the trace metrics, the holdout measurement of a
    completed run, its serving check (``padding``: validation loss and accuracy per padding
    width, the first as trained, the last as served; for a language model, ``generation``: what
    it wrote after prompts, judged against the source, and ``generation_gap``: the source's
    loss on it minus the holdout loss as trained; ``entropy_floor``: the source's entropy over
    the validation tokens, the lowest loss a model that only looks back can reach), what ran
    (scenario, model, bug, seed, ...), its ``role`` (``buggy``; ``control``, the disarmed twin
    of a buggy run; ``clean``), how it ended (``startup_s``: how long building the run took,
    before its first step), its
    ``setup_digest`` (:mod:`.setup_digest`; None when it did not build), the ranks
    of a distributed run and each detector's status; a ``honeypot`` run (a decoy's) is stored
    as the scenario ``<scenario>.honeypot``. The facts a
    detector's RunView gives besides the live objects (``num_classes``, ``dataset``, ``model``,
    ``steps``, ``loss_floor``) are kept, so a stored trace can be replayed to it."""
    summary = summarize(trace, num_classes)
    if outcome == "completed" and holdout is not None:
        holdout_loss, holdout_acc = holdout
        summary.update(holdout_loss=holdout_loss, holdout_acc=holdout_acc,
                       val_holdout_gap=summary["final_val_acc"] - holdout_acc)
    if outcome == "completed" and padding:
        as_trained, served = padding[0], padding[-1]
        summary.update(padding=padding, serve_acc=served["acc"],
                       serving_gap=as_trained["acc"] - served["acc"])
    if outcome == "completed" and generation and holdout is not None:
        summary.update(generation=generation, serve_loss=generation["source_loss"],
                       generation_gap=generation["source_loss"] - holdout[0])
    if entropy_floor is not None:
        summary["entropy_floor"] = entropy_floor
    scenario = scenario_of(cfg)
    summary.update(
        scenario=scenario, model=cfg.model.name, data=cfg.data.name,
        dataset=dataset or cfg.data.name, num_classes=num_classes, loss_floor=loss_floor,
        role="clean" if bug is None else "buggy" if armed else "control",
        bug=bug.id if bug else None, category=bug.category if bug else None,
        loud=bug.loud if bug else False, unproven=bool(bug and cfg.get("unproven")),
        onset=int(cfg.bug.onset) if bug else None,
        seed=int(cfg.seed), data_seed=int(cfg.data.seed), steps=int(cfg.harness.steps),
        outcome=outcome, release=release.digest(), key=release.scenario_key(scenario),
        crashed=outcome == "crashed", hung=outcome == "hang", error=error, wall_s=wall_s,
        startup_s=startup_s, setup_digest=setup_digest,
        device=device, torch_version=torch.__version__,
        cpu_kernels=torch.backends.cpu.get_cpu_capability(), cpu_model=cpu_model(),
        world_size=world_size,
        backend=backend, rank_errors=rank_errors, rank_param_divergence=rank_param_divergence,
        detectors={name: status.as_dict() for name, status in detectors.items()})
    # the bug's declared symptom on this run, beside its twin's for the leaderboard
    summary["symptom_value"] = summary.get(bug.check.metric) if bug else None
    if honeypot:  # a decoy pair is a scenario of its own, so it never pairs with the real one
        summary.update(scenario=f"{scenario}.{HONEYPOT_TAG}", honeypot=True)
    return summary
