"""``attention_rows``: attention weights whose rows do not sum to 1 or attend to padding."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from bugzoo import Alarm, Detector, Observation, RunView


class AttentionRows(Detector):
    """Heuristic: each query's attention weights form a distribution over the *real* keys — rows
    sum to 1 and padded keys get zero weight. Masking after the softmax, or a softmax over the
    wrong dimension, breaks this.

    The weights are not a module output, so they cannot be hooked without patching the model.
    Instead a forward pre-hook on every module exposing ``attention_weights(scores, mask)`` (with
    ``qkv`` and ``heads``, as in bugzoo's ``SelfAttention``) recomputes the scores from a copy of
    its inputs under ``no_grad`` with the module's own weights (``F.linear``, so no other hook
    fires and no RNG is used), calls the module's ``attention_weights`` and checks the rows,
    every ``every``-th forward pass. Category ``model``.

    Rows are compared with 1 within ``tol`` or, for weights computed in a low-precision dtype,
    within ``eps_units`` x that dtype's machine epsilon, whichever is larger: a bfloat16 softmax
    rounds each weight to 8 bits of mantissa, so its rows legitimately sum to 1 ± a few 0.004.
    """

    scope = "targeted"  # checks for one known mistake

    def __init__(self, every: int = 5, tol: float = 1e-3, eps_units: float = 4.0):
        self.every, self.tol, self.eps_units = every, tol, eps_units

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.calls, self.fired = 0, 0, False
        for name, module in run.model.named_modules():
            if callable(getattr(module, "attention_weights", None)) and hasattr(module, "qkv"):
                self.hook(module.register_forward_pre_hook, self._make_check(name))

    def _make_check(self, name: str):
        def check(module: nn.Module, inputs) -> None:
            self.calls += 1
            if self.fired or self.calls % self.every or len(inputs) < 2:
                return
            problem = self.inspect(module, inputs[0], inputs[1])
            if problem:
                self.fired = True
                self.queue(self.alarm(self.step, "attention_rows", "model",
                                      f"attention in '{name}': {problem}"))
        return check

    @torch.no_grad()
    def inspect(self, module: nn.Module, x: torch.Tensor, key_padding: torch.Tensor) -> str:
        x = x.detach().clone()
        b, s, d = x.shape
        h = module.heads
        qkv = F.linear(x, module.qkv.weight, module.qkv.bias)
        q, k, _ = qkv.view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        pad = key_padding[:, None, None, :]
        weights = module.attention_weights(scores, pad)
        tol = max(self.tol, self.eps_units * torch.finfo(weights.dtype).eps)
        weights = weights.float()
        real_query = ~key_padding  # [B, S]: rows of padded queries are not checked
        row_sums = weights.sum(-1).permute(0, 2, 1)[real_query]  # [N, H]
        if not bool(((row_sums - 1).abs() < tol).all()):
            worst = float((row_sums - 1).abs().max())
            return f"rows do not sum to 1 (worst off by {worst:.3g})"
        on_padding = weights.masked_fill(~pad, 0.0).amax()
        if float(on_padding) > tol:
            return f"padded keys get weight up to {float(on_padding):.3g}"
        return ""

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
