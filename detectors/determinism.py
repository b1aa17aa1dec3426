"""``determinism``: two runs from the same seed that do not make the same first steps."""

from __future__ import annotations

import math

from bugzoo import Alarm, Detector, Observation, RunView


class Determinism(Detector):
    """Recipe: run it twice. A seeded run is a function of its seed: the same initial weights,
    the same batches in the same order, the same dropout masks, so a second run from the same
    seed makes the same losses. A source of randomness that the seed does not reach (an
    unseeded generator, a shuffle drawn from OS entropy, a worker RNG) changes the first batch
    or the first weights, and the two runs part at once.

    The harness trains a twin of the run for ``steps`` steps before it starts
    (``RunView.twin_losses``); each of the watched run's first ``steps`` losses is compared with
    the twin's. They must agree to ``rel_tol``: CPU kernels are deterministic, and the kernels
    that are not (CUDA atomics summing in a varying order) change a float32 loss in its last
    bits, about 1e-7 of it, which a few steps of training do not lift to 1e-4; another batch,
    initialisation or dropout mask changes the loss by whole percents. A loss that is not finite
    in both runs at the same step counts as the same. Category ``reproducibility``, raised at
    the first step that differs. Does nothing where the harness makes no twin (distributed
    runs, the framework integrations).
    """

    twin_steps = 3

    def __init__(self, rel_tol: float = 1e-4):
        self.rel_tol = rel_tol

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.twin = run.twin_losses or []
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or obs.step >= len(self.twin):
            return []
        twin = self.twin[obs.step]
        if self.same(obs.loss, twin):
            return []
        self.fired = True
        return [self.alarm(obs.step, "nondeterministic", "reproducibility",
                           f"loss {obs.loss:.6g} at step {obs.step}, where a second run from "
                           f"the same seed made {twin:.6g}: the seed does not fix the run")]

    def same(self, loss: float, twin: float) -> bool:
        if not (math.isfinite(loss) and math.isfinite(twin)):
            return math.isfinite(loss) == math.isfinite(twin)
        return math.isclose(loss, twin, rel_tol=self.rel_tol)
