"""``isfinite_hooks``: forward ``isfinite`` hooks that name the first layer to go non-finite."""

from __future__ import annotations

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation
from detectors._hooks import all_finite, leaf_modules


class IsFiniteHooks(Detector):
    """Recipe: NaN forensics with a forward hook on every leaf layer (reference notes).

    Each leaf module checks its output with ``torch.isfinite``; the culprit is the first layer
    (in execution order) whose inputs are finite but whose output is not. One ``numerics`` alarm
    names it. Costs one reduction per layer per forward pass.
    """

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        for name, module in leaf_modules(run.model):
            self.hook(module.register_forward_hook, self._make_hook(name))

    def _make_hook(self, name: str):
        def check(module, inputs, output) -> None:
            if self.fired or all_finite(output):
                return
            self.fired = True
            origin = "its inputs were finite" if all_finite(inputs) else "inputs already non-finite"
            self.queue(self.alarm(self.step, "nonfinite_activation", "numerics",
                                  f"first non-finite output in layer '{name}' "
                                  f"({type(module).__name__}); {origin}"))
        return check

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
