"""``nan_hooks``: the reference notes' NaN-source finder, a NaN check on every module."""

from __future__ import annotations

from bugzoo_detectors._hooks import has_nan, training_forward

from bugzoo import Alarm, Detector, Observation, RunView


class NanHooks(Detector):
    """Recipe: "hook every module" NaN finder (reference notes 002/003), as written there.

    Unlike ``isfinite_hooks`` (leaf layers, NaN and Inf, culprit = first layer with finite
    inputs), this hooks *every* named module including containers and the model itself, checks
    outputs for NaN only (Inf passes), and reports the first module whose output holds a NaN.
    Containers finish after their children, so the first report is the innermost module.
    Training forward passes only (as the recipe hooks a training loop).
    """

    role = "tool"

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        for name, module in run.model.named_modules():
            self.hook(module.register_forward_hook, self._make_hook(name or "<model>"))

    def _make_hook(self, name: str):
        def check(module, inputs, output) -> None:
            if self.fired or not training_forward():
                return
            if has_nan(output):
                self.fired = True
                self.queue(self.alarm(self.step, "nan_activation", "numerics",
                                      f"NaN in forward output of '{name}' "
                                      f"({type(module).__name__})"))
        return check

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
