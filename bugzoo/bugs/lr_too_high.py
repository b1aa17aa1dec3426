"""lr_too_high: the learning rate is set orders of magnitude too high (a typo'd exponent)."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Symptom, patch_method


def build_optimizer(self) -> torch.optim.Optimizer:
    o = self.cfg.optim
    # The mistake: lr comes from a typo'd value (e.g. 1e3 written for 1e-3).
    return torch.optim.AdamW(self.model.parameters(), lr=float(self.cfg.bug.params.lr),
                             betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay)


class LrTooHigh(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_optimizer", build_optimizer)


BUG = LrTooHigh(
    id="lr_too_high",
    title="Learning rate far too high",
    category="optim",
    symptom=Symptom("nonfinite", "event",
                    "parameters blow up within a few dozen steps and the loss becomes inf/NaN"),
    explanation=("A learning rate several orders of magnitude too large (a sign slip in the "
                 "exponent is the classic) makes every update overshoot. With AdamW the "
                 "decoupled weight decay multiplies each weight by (1 - lr * wd) per step: once "
                 "lr * wd > 2 that factor is below -1, the weights grow geometrically and the "
                 "forward pass overflows to inf, then NaN."),
    buggy="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e3, weight_decay=0.01)  # meant 1e-3""",
    fixed="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)""",
)
