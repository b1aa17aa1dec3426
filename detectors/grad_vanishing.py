"""``grad_vanishing``: the gradient norm (global or of one layer) collapses toward zero."""

from __future__ import annotations

import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class GradVanishing(Detector):
    """Heuristic: "gradient norm collapsing means vanishing gradients" (reference notes).

    The first ``baseline`` steps give each layer's (and the global) typical gradient norm; a norm
    that then stays below ``ratio`` times its baseline for ``patience`` consecutive steps raises
    a ``model`` alarm. A layer whose gradient is exactly zero throughout the baseline (graph cut
    off upstream of it) is reported right after the baseline.
    """

    observation_only = True

    def __init__(self, baseline: int = 10, ratio: float = 1e-3, patience: int = 10):
        self.baseline, self.ratio, self.patience = baseline, ratio, patience

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.history: dict[str, list[float]] = {}
        self.reference: dict[str, float] = {}
        self.low: dict[str, int] = {}
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired:
            return []
        norms = {"<global>": obs.grad_norm, **obs.layer_grad_norms}
        if obs.step < self.baseline:
            for name, value in norms.items():
                self.history.setdefault(name, []).append(value)
            return []
        if not self.reference:
            self.reference = {n: statistics.median(v) for n, v in self.history.items()}
            dead = [n for n, v in self.history.items() if n != "<global>" and max(v) == 0.0]
            if dead:
                self.fired = True
                return [self.alarm(obs.step, "zero_layer_gradient", "model",
                                   f"{len(dead)} parameter(s) got exactly zero gradient in every "
                                   f"one of the first {self.baseline} steps, e.g. {dead[0]}")]
        for name, value in norms.items():
            ref = self.reference.get(name, 0.0)
            if ref <= 0.0 or not value < self.ratio * ref:  # NaN is not vanishing
                self.low[name] = 0
                continue
            self.low[name] = self.low.get(name, 0) + 1
            if self.low[name] >= self.patience:
                self.fired = True
                where = "global gradient" if name == "<global>" else f"gradient of {name}"
                return [self.alarm(obs.step, "vanishing_gradient", "model",
                                   f"{where} norm {value:.2e} stayed below {self.ratio:g} x its "
                                   f"early median {ref:.2e} for {self.patience} steps")]
        return []
