"""``fp16_scaling``: float16 training without loss scaling, or a collapsing loss scale."""

from __future__ import annotations

import torch
from bugzoo_detectors._hooks import tensors

from bugzoo import Alarm, Detector, Observation, RunView


class FP16Scaling(Detector):
    """Recipe: mixed precision "the right way" needs a GradScaler with float16 (reference notes).

    float16 is noticed from the parameters' dtype at setup and from the model's output dtype
    (autocast) via a forward hook. While float16 is in use, a step without a loss scale
    (``obs.scale is None``) raises ``fp16_without_scaler``; with a scaler, a scale that has
    fallen below ``min_scale`` (repeated overflows) raises ``loss_scale_collapse``. bfloat16
    needs no scaling and is ignored. Category ``precision``; the message carries the share of
    exactly-zero gradient entries (underflow shows there).
    """

    scope = "targeted"  # checks for one known mistake

    def __init__(self, min_scale: float = 1.0):
        self.min_scale = min_scale

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.fp16 = any(p.dtype == torch.float16 for p in run.model.parameters())
        self.fired = False
        self.hook(run.model.register_forward_hook, self._watch_output)

    def _watch_output(self, module, inputs, output) -> None:
        if not self.fp16 and any(t.dtype == torch.float16 for t in tensors(output)):
            self.fp16 = True

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or not self.fp16:
            return []
        detail = (f"{obs.zero_grad_frac:.1%} of gradient entries are zero, "
                  f"{obs.nonfinite_grads} non-finite")
        if obs.scale is None:
            self.fired = True
            return [self.alarm(obs.step, "fp16_without_scaler", "precision",
                               f"float16 activations/parameters but no loss scaling; {detail}")]
        if obs.scale < self.min_scale:
            self.fired = True
            return [self.alarm(obs.step, "loss_scale_collapse", "precision",
                               f"loss scale fell to {obs.scale:g}; {detail}")]
        return []
