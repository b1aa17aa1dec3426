"""``torch_grad_norm``: the check of ``clip_grad_norm_(..., error_if_nonfinite=True)`` used as a
detector."""

from __future__ import annotations

import torch

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation


class TorchGradNorm(Detector):
    """Tool: PyTorch's own gradient-norm check, as ``torch.nn.utils.clip_grad_norm_(params,
    max_norm, error_if_nonfinite=True)`` makes it before each optimizer step: the total norm of
    every gradient (``torch.nn.utils.get_total_norm``, the part of ``clip_grad_norm_`` that
    checks, so no gradient is rescaled), and a ``RuntimeError`` when it is NaN or infinite.
    Here the error is the alarm and the run goes on. It reads the live gradients in an
    optimizer step pre-hook, so it watches live."""

    role = "tool"
    run_by_default = False  # on the tools board (results/tools.md), not yet the full one
    live_reason = "an optimizer step pre-hook reads the live gradients"

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        self.hook(run.optimizer.register_step_pre_hook, self._before_step)

    def _before_step(self, optimizer: torch.optim.Optimizer, *_) -> None:
        if self.fired:
            return
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        try:
            torch.nn.utils.get_total_norm(grads, error_if_nonfinite=True)
        except RuntimeError as e:
            self.fired = True
            self.queue(self.alarm(self.step, "nonfinite_grad_norm", "numerics",
                                  f"clip_grad_norm_'s check: {str(e).splitlines()[0]}"))

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
