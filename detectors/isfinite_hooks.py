"""``isfinite_hooks``: forward ``isfinite`` hooks that name the module where values go non-finite."""

from __future__ import annotations

from bugzoo_detectors._hooks import all_finite, training_forward

from bugzoo import Alarm, Detector, Observation, RunView


class IsFiniteHooks(Detector):
    """Recipe: NaN forensics with a forward hook on every layer (reference notes): "the first
    layer that produces them is the culprit".

    Every module checks its output with ``torch.isfinite``. The culprit is the first module whose
    inputs are all finite but whose output is not; as a container finishes after its children,
    this is the innermost module whose *own* computation went wrong (e.g. the softmax inside an
    attention block, not the projection after it). One ``numerics`` alarm names it. If
    non-finite values only ever arrive from the inputs of the model, a ``data`` alarm says so.
    Costs one sum per module per training forward pass (evaluation passes, under ``no_grad``,
    are not checked).
    """

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        self.fed_nonfinite: str | None = None
        for name, module in run.model.named_modules():
            self.hook(module.register_forward_hook, self._make_hook(name or "<model>"))

    def _make_hook(self, name: str):
        def check(module, inputs, output) -> None:
            if self.fired or not training_forward() or all_finite(output):
                return
            if not all_finite(inputs):
                self.fed_nonfinite = self.fed_nonfinite or name
                return
            self.fired = True
            self.queue(self.alarm(self.step, "nonfinite_activation", "numerics",
                                  f"first non-finite output in '{name}' ({type(module).__name__}) "
                                  "although its inputs were finite"))
        return check

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        alarms = self.flush()
        if not self.fired and self.fed_nonfinite is not None:
            self.fired = True
            alarms.append(self.alarm(obs.step, "nonfinite_input", "data",
                                     f"non-finite values reach '{self.fed_nonfinite}' from the "
                                     "model's inputs"))
        return alarms
