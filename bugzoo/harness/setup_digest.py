"""What a detector can read of a run at setup without its seeds: its settings and structure.

A buggy run is judged against its disarmed twin, trained with the same configuration and seeds.
For most bugs the two are the same object graph until the onset, so anything a detector reads
at setup is the same in both, and a strategy that reads only the setup scores 0. For a bug
that *is* a setting or a structure (a learning rate, a missing layer, a frozen parameter) the
twin differs in what the run view shows from step 0, and a strategy that merely notes the
catalogue's defaults would tell the two apart. The scoring takes such pairs off the headline
(:mod:`bugzoo.judge.scoring`); the runner records this digest in every run's summary.

The description covers what does not depend on the seeds: hyperparameters, types, the module
tree, parameter shapes and flags, each parameter's scale (its order of magnitude, which an
initialisation bug changes), the loaders' settings and the splits' shapes. The numbers
themselves (weights, data) are left out: they change with the seed, and the test split's
seeds are unpublished, so memorising them wins nothing (``trace_memoriser`` scores 0).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bugzoo.detector import RunView
from bugzoo.harness import store

log = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    """A JSON-friendly form of a setting: tensors as numbers, containers element-wise,
    anything else (functions, objects) as its type's name."""
    if isinstance(value, torch.Tensor):
        return value.tolist() if value.numel() == 1 else f"tensor{list(value.shape)}"
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return type(value).__name__


def _settings(obj: Any) -> dict:
    """An object's public attributes that are plain values (a layer's sizes, a loss's
    reduction and smoothing, a loader's batch size)."""
    return {k: _plain(v) for k, v in sorted(getattr(obj, "__dict__", {}).items())
            if not k.startswith("_") and isinstance(v, bool | int | float | str | tuple)}


def scale(tensor: torch.Tensor) -> int | None:
    """A tensor's order of magnitude: log2 of its root mean square, rounded (None for an
    empty or all-zero tensor). The two runs of a pair share their seed, so their scales agree
    unless the plant changed the weights: an initialisation ten times too small or too large
    moves them by three or more. Across seeds a small tensor's scale may move by one."""
    with torch.no_grad():
        rms = float(tensor.detach().float().pow(2).mean().sqrt()) if tensor.numel() else 0.0
    return round(math.log2(rms)) if rms > 0 and math.isfinite(rms) else None


def describe_module(module: nn.Module) -> list:
    """Every submodule's name, type, settings and mode, then every parameter and buffer with
    its shape, dtype, whether it trains and its scale."""
    modules = [[name, type(m).__name__, m.extra_repr(), _settings(m)]
               for name, m in module.named_modules()]
    tensors = [[name, list(t.shape), str(t.dtype), t.requires_grad, scale(t)]
               for name, t in [*module.named_parameters(), *module.named_buffers()]]
    return [modules, tensors]


def describe_optimizer(optimizer: torch.optim.Optimizer) -> list:
    """The optimizer's type, and per parameter group its hyperparameters and the shapes it
    updates."""
    groups = [{**{k: _plain(v) for k, v in sorted(g.items()) if k != "params"},
               "shapes": [list(p.shape) for p in g["params"]]} for g in optimizer.param_groups]
    return [type(optimizer).__name__, groups]


def describe_loader(loader: Any) -> dict:
    """The loader's type and settings, and its split's tensors' shapes and dtypes."""
    split = getattr(loader, "split", None)
    tensors = {k: [list(v.shape), str(v.dtype)]
               for k, v in sorted(getattr(split, "__dict__", {}).items())
               if isinstance(v, torch.Tensor)}
    return {"type": type(loader).__name__, **_settings(loader),
            "worker_init_fn": getattr(loader, "worker_init_fn", None) is not None,
            "split": tensors}


def describe_setup(view: RunView) -> dict:
    """What a detector reads of ``view`` at setup that does not depend on the run's seeds."""
    scheduler = view.lr_scheduler
    return {
        "facts": [view.steps, view.num_classes, view.model_name, view.dataset,
                  round(float(view.loss_floor), 9)],
        "model": describe_module(view.model),
        "optimizer": describe_optimizer(view.optimizer),
        "scheduler": [type(scheduler).__name__, _plain(getattr(scheduler, "base_lrs", None))]
        if scheduler is not None else None,
        "loss": describe_module(view.loss_fn),
        "train_loader": describe_loader(view.train_loader),
        "val_loader": describe_loader(view.val_loader),
    }


def setup_digest(view: RunView) -> str | None:
    """A short hash of :func:`describe_setup`: equal for two runs a setup reader cannot tell
    apart. None, with a warning, when the setup cannot be described (an outside model or
    loader of an unexpected kind): the run goes on, and its pair stays on the headline."""
    try:
        text = json.dumps(describe_setup(view), sort_keys=True, default=str)
    except Exception as e:  # describing must never cost the run itself
        log.warning("no setup digest: %s: %s", type(e).__name__, e)
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def summary_with_setup(path: Path) -> dict:
    """The summary of the run stored at ``path``, its ``setup_digest`` None where the run was
    stored before digests were recorded (scoring reads what a run recorded; it never rebuilds
    one)."""
    summary = store.read_summary(path)
    summary.setdefault("setup_digest", None)
    return summary
