"""``stale_grads``: gradients already present when a new step's backward begins."""

from __future__ import annotations

import torch

from bugzoo import Alarm, Detector, Observation, RunView


class StaleGrads(Detector):
    """Heuristic: after ``optimizer.step()`` the next backward must start from empty (``None``)
    or zeroed gradients; otherwise the loop forgot ``zero_grad()`` and gradients accumulate.

    An optimizer step post-hook arms every parameter; a tensor hook on each parameter, fired when
    the first backward of the next step reaches it, checks that ``p.grad`` is ``None`` or all
    zero and disarms it. Micro-batch accumulation inside one step is therefore not flagged.
    Category ``loop``.
    """

    scope = "targeted"  # checks for one known mistake

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        self.armed: set[int] = set()
        self.hook(run.optimizer.register_step_post_hook, self._arm)
        trainable = [(n, p) for n, p in run.model.named_parameters() if p.requires_grad]
        for name, p in trainable:
            self.hook(p.register_hook, self._make_check(name, p))
        self.hooked = frozenset(id(p) for _, p in trainable)  # the only ones ever checked

    def _arm(self, optimizer, args, kwargs) -> None:
        self.armed = set(self.hooked)

    def _make_check(self, name: str, param: torch.Tensor):
        def check(grad) -> None:
            if id(param) not in self.armed:
                return
            self.armed.discard(id(param))
            if self.fired or param.grad is None or not bool(param.grad.any()):
                return
            self.fired = True
            self.queue(self.alarm(self.step, "stale_gradients", "loop",
                                  f"{name}.grad was non-zero when backward began after an "
                                  "optimizer step: zero_grad() missing?"))
        return check

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
