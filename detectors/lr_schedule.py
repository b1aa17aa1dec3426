"""``lr_schedule``: learning-rate schedule sanity — zero, frozen or jumping."""

from __future__ import annotations

from bugzoo import Alarm, Detector, Observation, RunView


class LRSchedule(Detector):
    """Checklist: "log the learning rate; schedule bugs are common" (reference notes).

    * ``lr_zero``: the learning rate is 0 before the last ``tail`` share of the run;
    * ``lr_frozen``: a scheduler exists but the rate has not changed for ``flat`` steps
      (``scheduler.step()`` not called, or called per epoch instead of per step);
    * ``lr_jump``: the rate rises by more than ``jump`` x from one step to the next (a restarted
      or re-created schedule; falls are left alone: decays legitimately drop fast near their end).

    Category ``optim``. Assumes per-step schedules (a step-decay schedule would need ``flat``
    above its step size).
    """

    scope = "targeted"  # checks for one known mistake

    def __init__(self, flat: int = 30, jump: float = 2.5, tail: float = 0.05):
        self.flat, self.jump, self.tail = flat, jump, tail

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.previous: float | None = None
        self.unchanged = 0
        self.reported: set[str] = set()

    def observe(self, obs: Observation) -> list[Alarm]:
        found = []
        lr, prev = obs.lr, self.previous
        self.previous = lr
        if lr == 0 and obs.step < (1 - self.tail) * self.run.steps:
            found.append(("lr_zero", f"learning rate is 0 at step {obs.step}"))
        if prev is not None:
            self.unchanged = self.unchanged + 1 if lr == prev else 0
            if self.run.lr_scheduler is not None and self.unchanged >= self.flat:
                found.append(("lr_frozen", f"a scheduler exists but the learning rate stayed "
                                           f"{lr:.3g} for {self.unchanged} steps"))
            if prev > 0 and lr > self.jump * prev:
                found.append(("lr_jump", f"learning rate jumped from {prev:.3g} to {lr:.3g}"))
        alarms = []
        for symptom, message in found:
            if symptom not in self.reported:
                self.reported.add(symptom)
                alarms.append(self.alarm(obs.step, symptom, "optim", message))
        return alarms
