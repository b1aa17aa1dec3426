"""Per-run summary metrics computed from the trace; symptom checks compare these fields."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd

from bugzoo.telemetry import TIMING_COLUMNS


def trace_digest(trace: pd.DataFrame) -> str:
    """A hash of every non-timing trace column: equal digests mean bitwise-equal traces."""
    stable = trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace.columns])
    return hashlib.sha256(pd.util.hash_pandas_object(stable, index=True).values.tobytes()
                          ).hexdigest()[:16]


def _tail_median(series: pd.Series, n: int = 10) -> float:
    values = series.dropna().tail(n)
    return float(values.median()) if len(values) else math.nan


def summarize(trace: pd.DataFrame, num_classes: int) -> dict:
    """Scalar metrics of a completed (or partial) trace."""
    if trace.empty:
        return {"steps_completed": 0, "expected_initial_loss": math.log(num_classes)}
    loss = trace["loss"]
    finite = np.isfinite(loss)
    evals = trace.dropna(subset=["val_acc"])
    nonfinite_steps = trace.loc[~finite, "step"]
    early, late = loss.iloc[: max(1, len(loss) // 10)], loss.iloc[-max(1, len(loss) // 5):]
    return {
        "steps_completed": int(len(trace)),
        "initial_loss": float(loss.iloc[0]),
        "expected_initial_loss": math.log(num_classes),
        "final_loss": _tail_median(loss),
        "min_loss": float(loss[finite].min()) if finite.any() else math.nan,
        "loss_drop": float(early.median() - late.median()),
        "late_loss_std": float(late.std()) if len(late) > 1 else 0.0,
        "final_val_loss": float(evals["val_loss"].iloc[-1]) if len(evals) else math.nan,
        "final_val_acc": float(evals["val_acc"].iloc[-1]) if len(evals) else math.nan,
        "best_val_acc": float(evals["val_acc"].max()) if len(evals) else math.nan,
        "nonfinite": bool((~finite).any() or (trace["nonfinite_grads"] > 0).any()),
        "first_nonfinite_step": int(nonfinite_steps.iloc[0]) if len(nonfinite_steps) else None,
        "max_grad_norm": float(trace["grad_norm"].max()),
        "median_grad_norm": float(trace["grad_norm"].median()),
        "final_grad_norm": _tail_median(trace["grad_norm"]),
        "mean_zero_grad_frac": float(trace["zero_grad_frac"].mean()),
        "mean_update_ratio": float(trace["update_ratio"].mean()),
        "final_param_norm": float(trace["param_norm"].iloc[-1]),
        "final_lr": float(trace["lr"].iloc[-1]),
        "max_lr": float(trace["lr"].max()),
        "mean_lr": float(trace["lr"].mean()),
        "train_mode_frac": float(trace["training"].mean()),
        "peak_rss_mb": float(trace["rss_mb"].max()),
        "rss_growth_mb": float(trace["rss_mb"].tail(10).median() - trace["rss_mb"].head(10).median()),
        # live heap at the end vs after the first steps (optimizer state exists by then)
        "heap_growth_mb": float(trace["heap_mb"].tail(10).median()
                                - trace["heap_mb"].iloc[5:15].median()),
        "data_time_frac": float(trace["data_s"].sum() / max(trace["step_s"].sum(), 1e-9)),
        "median_step_s": float(trace["step_s"].median()),
        "trace_digest": trace_digest(trace),
    }
