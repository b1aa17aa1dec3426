"""Per-step telemetry: the Observation handed to detectors and the trace row stored per run.

Everything is computed with a few fused tensor ops and read back with a single ``tolist()``
per step (one device sync on GPU), so telemetry stays cheap.
"""

from __future__ import annotations

import ctypes
import os
import resource
from dataclasses import dataclass, field, fields

import pandas as pd
import torch
from torch import nn
from torch._utils import _flatten_dense_tensors

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 0.0


@dataclass
class Observation:
    """What a detector sees at one training step (one optimizer step).

    * ``step``: the step's index, from 0.
    * ``loss``: the training loss of the step (mean over its micro-batches), as float32.
    * ``lr``: the learning rate of the optimizer's first parameter group when the step began.
    * ``grad_norm``: global L2 norm of every parameter's gradient after backward (and
      unscaling), before clipping; ``layer_grad_norms``: the same per parameter, by its name
      in ``model.named_parameters()`` (parameters without a gradient are left out).
    * ``param_norm``: global L2 norm of the parameters after the step; ``update_norm``: L2
      norm of what the step changed; ``update_ratio``: ``update_norm / param_norm``.
    * ``nonfinite_loss``: the loss is NaN or infinite; ``nonfinite_grads``: how many gradient
      elements are; ``zero_grad_frac``: the share of gradient elements that are exactly 0.
    * ``step_s``: wall seconds of the step (evaluation included, when it ran); ``data_s``:
      of those, seconds spent fetching batches; ``elapsed_s``: seconds since training began,
      at the end of this step.
    * ``rss_mb``: resident memory of the process, MiB; ``heap_mb``: bytes allocated through
      malloc, MiB (see :func:`heap_mb`); ``cuda_mb``: CUDA memory allocated, MiB (0 on CPU).
    * ``scale``: the GradScaler's loss scale, or ``None`` without one.
    * ``training``: ``model.training`` when the step began.
    * ``val_loss``, ``val_acc``: validation cross-entropy and accuracy, on evaluation steps
      only (every ``harness.eval_interval`` steps and the last); ``None`` otherwise.
    """

    step: int
    loss: float
    lr: float
    grad_norm: float
    param_norm: float
    update_norm: float
    update_ratio: float
    nonfinite_loss: bool
    nonfinite_grads: int
    zero_grad_frac: float
    step_s: float
    data_s: float
    elapsed_s: float
    rss_mb: float
    heap_mb: float
    cuda_mb: float
    scale: float | None
    training: bool
    val_loss: float | None = None
    val_acc: float | None = None
    layer_grad_norms: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict:
        """Every field, as the run keeps it: the scalars (a trace row) and a copy of the
        per-layer norms (split off by :func:`trace_tables`)."""
        row = dict(vars(self))
        row[LAYERS] = dict(self.layer_grad_norms)
        return row


LAYERS = "layer_grad_norms"  # the row key (and the store's file stem) of the per-layer norms
LAYER_COLUMNS = ["step", "layer", "grad_norm"]


def trace_tables(rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trace (one row per step, every scalar field) and the per-layer gradient norms (one
    row per step and parameter, in ``named_parameters()`` order) of rows made by
    :meth:`Observation.row`."""
    trace = pd.DataFrame([{k: v for k, v in r.items() if k != LAYERS} for r in rows])
    layers = pd.DataFrame([(r["step"], name, norm) for r in rows
                           for name, norm in r.get(LAYERS, {}).items()], columns=LAYER_COLUMNS)
    return trace, layers.astype({"step": "int64", "layer": "str", "grad_norm": "float64"})


def observations(trace: pd.DataFrame, layers: pd.DataFrame) -> list[Observation]:
    """The Observations a run's tables were made from (the inverse of :func:`trace_tables`),
    equal field for field. A table cell cannot tell a missing value from a NaN, so the optional
    fields are read back by their meaning: an evaluation step is one with a validation accuracy
    (never NaN; its loss may be), and a loss scale is never NaN."""
    if trace.empty:
        return []
    per_step: dict[int, dict[str, float]] = {}
    for step, name, norm in zip(layers["step"].tolist(), layers["layer"].tolist(),
                                layers["grad_norm"].tolist(), strict=True):
        per_step.setdefault(step, {})[name] = norm
    names = [f.name for f in fields(Observation) if f.name != LAYERS]
    found = []
    for row in trace[names].to_dict("records"):
        evaluated = _present(row["val_acc"])
        row.update(val_loss=row["val_loss"] if evaluated else None,
                   val_acc=row["val_acc"] if evaluated else None,
                   scale=row["scale"] if _present(row["scale"]) else None)
        found.append(Observation(**row, layer_grad_norms=per_step.get(row["step"], {})))
    return found


def _present(value) -> bool:
    return value is not None and value == value  # NaN is the one value unequal to itself


# Columns that measure time or memory: they legitimately differ between identical runs.
TIMING_COLUMNS = ("step_s", "data_s", "elapsed_s", "rss_mb", "heap_mb", "cuda_mb")


_STATM: dict[int, int] = {}  # pid -> open /proc/<pid>/statm (re-read in place every step)


def rss_mb() -> float:
    """Resident set size of this process in MiB (peak RSS where /proc is unavailable)."""
    pid = os.getpid()
    try:
        if pid not in _STATM:
            _STATM[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
        return int(os.pread(_STATM[pid], 256, 0).split()[1]) * PAGE_MB
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        return libc.mallinfo2
    except (OSError, AttributeError):
        return None


_MALLINFO2 = _mallinfo2()


def heap_mb() -> float:
    """Bytes currently allocated through malloc (CPU tensors included), in MiB.

    Unlike RSS, this falls when memory is freed and rises when a leak reuses freed pages, so a
    leak shows even in a process that already peaked. glibc only; elsewhere it is the RSS.
    """
    if _MALLINFO2 is None:
        return rss_mb()
    info = _MALLINFO2()
    return (info.uordblks + info.hblkhd) / 2**20


class Telemetry:
    """Measures gradients, parameters and updates of one model, step after step."""

    def __init__(self, model: nn.Module):
        self.named = [(n, p) for n, p in model.named_parameters()]
        self.previous = self.flat_parameters()
        self.grad_stats = torch.zeros(3)
        self.grad_names: list[str] = []

    @torch.no_grad()
    def flat_parameters(self) -> torch.Tensor:
        """A copy of every parameter, concatenated into one flat tensor."""
        flat = _flatten_dense_tensors([p for _, p in self.named])
        return flat.clone() if len(self.named) == 1 else flat  # a lone tensor comes as a view

    def measure_gradients(self) -> None:
        """Record gradient statistics; call after backward (and unscaling), before the step."""
        with_grad = [(n, p.grad) for n, p in self.named if p.grad is not None]
        self.grad_names = [n for n, _ in with_grad]
        if not with_grad:
            self.grad_stats = torch.zeros(3)
            return
        # few, fused ops: on a small model each op's fixed cost outweighs its arithmetic
        with torch.no_grad():
            grads = [g for _, g in with_grad]
            flat = _flatten_dense_tensors(grads)
            layer_norms = torch.stack(torch._foreach_norm(grads)).float()
            # x - x is 0 where x is finite and NaN where it is not: cheaper than isfinite + sum
            nonfinite = torch.count_nonzero(flat - flat).float()
            zero_frac = 1 - torch.count_nonzero(flat) / flat.numel()
            self.grad_stats = torch.cat([
                torch.linalg.vector_norm(layer_norms).reshape(1),
                torch.stack([nonfinite, zero_frac]),
                layer_norms,
            ])

    def measure_update(self) -> torch.Tensor:
        """Parameter norm and update norm since the previous call; call after the step.

        Each is the norm of one flat tensor (not a norm of per-parameter norms): a few ops,
        whatever the number of parameters."""
        params = self.flat_parameters()
        update = params - self.previous
        self.previous = params
        return torch.stack([torch.linalg.vector_norm(t, dtype=torch.float32)
                            for t in (params, update)])

    def observe(self, step: int, loss: torch.Tensor, **context) -> Observation:
        """Assemble one Observation; ``context`` carries the loop's scalars (lr, timings, ...)."""
        update = self.measure_update()
        values = torch.cat([loss.detach().float().reshape(1).cpu(), update.cpu(),
                            self.grad_stats.cpu()]).tolist()
        loss_value, param_norm, update_norm = values[:3]
        grad_norm, nonfinite, zero_frac, *layers = values[3:]
        return Observation(
            step=step,
            loss=loss_value,
            grad_norm=grad_norm,
            param_norm=param_norm,
            update_norm=update_norm,
            update_ratio=update_norm / param_norm if param_norm > 0 else 0.0,
            nonfinite_loss=not (abs(loss_value) < float("inf")),
            nonfinite_grads=int(nonfinite),
            zero_grad_frac=zero_frac,
            rss_mb=rss_mb(),
            heap_mb=heap_mb(),
            layer_grad_norms=dict(zip(self.grad_names, layers, strict=True)),
            **context,
        )
