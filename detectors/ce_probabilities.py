"""``ce_probabilities``: the loss function is fed probabilities instead of logits."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo import Alarm, Detector, Observation, RunView


def on_simplex(x: torch.Tensor, tol: float = 1e-3) -> bool:
    """True when every row of ``x`` lies in [0, 1] and sums to 1 (a probability vector)."""
    if not x.is_floating_point() or x.dim() < 2 or x.shape[-1] < 2:
        return False
    x = x.detach().float()
    # lower bound first: logits (some negative) fail it, so the upper one is rarely computed
    in_range = bool((x >= -tol).all()) and bool((x <= 1 + tol).all())
    return in_range and bool(((x.sum(-1) - 1).abs() < tol).all())


class CEProbabilities(Detector):
    """Heuristic: ``CrossEntropyLoss`` expects raw logits; inputs that are already rows of the
    probability simplex (in [0, 1], summing to 1) mean a softmax ran twice.

    A forward pre-hook on the run's loss module checks its first input on every training step.
    Category ``loss``.
    """

    scope = "targeted"  # checks for one known mistake

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        if isinstance(run.loss_fn, nn.Module):  # a plain function cannot be hooked
            self.hook(run.loss_fn.register_forward_pre_hook, self._check)

    def _check(self, module, inputs) -> None:
        if self.fired or not inputs or not isinstance(inputs[0], torch.Tensor):
            return
        if on_simplex(inputs[0]):
            self.fired = True
            self.queue(self.alarm(self.step, "loss_input_probabilities", "loss",
                                  f"{type(module).__name__} received probabilities (rows in "
                                  "[0, 1] summing to 1), not logits: softmax applied twice?"))

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
