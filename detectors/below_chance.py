"""``below_chance``: a model that fits its training labels but scores below chance on validation."""

from __future__ import annotations

import math

from bugzoo import Alarm, Detector, Observation, RunView


class BelowChance(Detector):
    """Heuristic: validation accuracy far *below* chance means the two splits disagree on what
    the labels mean.

    A model that learned nothing useful scores about chance (1 / classes) on validation data,
    and one that overfits scores chance or better. Scoring systematically worse than chance
    takes knowledge used the wrong way round: labels shifted, swapped or remapped between the
    training and the validation pipeline. At each evaluation, once the training loss is below
    ``learned`` x log(classes) (the model has learned its training labels), a validation
    accuracy below ``fraction`` x chance raises a ``data`` alarm. Half of chance is far outside
    the sampling spread of a chance-level model on any validation split of a hundred rows or
    more (for two classes: 0.25 against 0.5 ± 0.05).
    """

    observation_only = True

    def __init__(self, fraction: float = 0.5, learned: float = 0.5):
        self.fraction, self.learned = fraction, learned

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.chance = 1.0 / max(2, run.num_classes)
        self.fit_loss = self.learned * math.log(max(2, run.num_classes))
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or obs.val_acc is None or not obs.loss < self.fit_loss:
            return []
        if obs.val_acc >= self.fraction * self.chance:
            return []
        self.fired = True
        return [self.alarm(obs.step, "below_chance", "data",
                           f"validation accuracy {obs.val_acc:.3f} is below half of chance "
                           f"(chance: {self.chance:.3f}) while the training loss is "
                           f"{obs.loss:.3g}: the splits disagree on the labels")]
