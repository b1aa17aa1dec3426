"""Small helpers shared by the hook-based built-in detectors."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a module's input or output (a tensor, or nested tuples/lists/dicts)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors(v)


def all_finite(value: Any) -> bool:
    """True when every floating-point tensor in ``value`` is finite.

    Fast path: a sum is finite whenever every element is, and NaN or Inf in any element makes it
    non-finite; only a sum that overflowed is checked element by element. The sum is read with
    ``item()`` and tested in Python: one tensor op per tensor (the sum) instead of two."""
    return all(math.isfinite(t.detach().sum().item()) or bool(torch.isfinite(t).all())
               for t in tensors(value) if t.is_floating_point())


def has_nan(value: Any) -> bool:
    """True when a floating-point tensor in ``value`` holds a NaN (Inf alone does not count).

    Fast path as in ``all_finite``: NaN anywhere makes the sum NaN; a NaN sum without a NaN
    element (+Inf and -Inf met) is ruled out element by element."""
    return any(math.isnan(t.detach().sum().item()) and bool(torch.isnan(t).any())
               for t in tensors(value) if t.is_floating_point())


def training_forward() -> bool:
    """True inside a forward pass that builds a graph (training), False under ``no_grad``
    (evaluation, probes): the forward hooks below check the training forwards only."""
    return torch.is_grad_enabled()


def strip_hooks(model: nn.Module) -> nn.Module:
    """Drop every module hook from a (copied) model, so probes on a copy trigger no detector."""
    for m in model.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                     "_backward_pre_hooks", "_forward_hooks_with_kwargs",
                     "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"):
            store = getattr(m, attr, None)
            if store is not None:
                store.clear()
    for p in model.parameters():
        if getattr(p, "_backward_hooks", None):
            p._backward_hooks = None
    return model
