"""Honeypots: decoy bugs that look planted and change nothing.

A decoy is planted as a real bug is (a patch of a seam of the loop from its onset, the bug in
its module's globals, the module's file name in its code) and its replacement does exactly what
the clean seam does. A sweep runs, per model, one decoy pair that impersonates one of its buggy
scenarios (the real id, card and settings), armed and disarmed. Only a detector that reads
which bug is planted, or which run of a pair is armed, rather than what the run does, can
score on those pairs; each board shows that score as its honeypot column.
"""

from __future__ import annotations

import dataclasses
import random
import secrets

from bugzoo.bugs import Bug, SymptomCheck
from bugzoo.bugs.base import from_onset, patch_method

TAG = "honeypot"  # a decoy run is stored as seed<k>.honeypot/ (its control .honeypot.control/)
DECOY_ONSET = 5  # where a made-up decoy's plant would start, if it did anything
_CLEAN_SEAM = ("def zero_grad(self):\n"
               "    self.optimizer.zero_grad(set_to_none=True)  # what the clean seam does\n")


class DecoyBug(Bug):
    """A bug planted as a real one is, whose replacement does what the clean seam does."""

    def before_build(self, trainer) -> None:
        patch_method(trainer, "zero_grad", self.replacement, active=from_onset(trainer))


def _planted(bug: DecoyBug) -> DecoyBug:
    """``bug`` with its no-op plant compiled as if from the bug's own module."""
    namespace: dict = {"__name__": f"bugzoo.bugs.{bug.id}", "BUG": bug}
    exec(compile(_CLEAN_SEAM, f"bugzoo/bugs/{bug.id}.py", "exec"), namespace)
    object.__setattr__(bug, "replacement", namespace["zero_grad"])
    return bug


def impersonating(bug: Bug) -> DecoyBug:
    """A decoy with ``bug``'s id, card and settings, and no effect."""
    card = {f.name: getattr(bug, f.name) for f in dataclasses.fields(Bug)}
    return _planted(DecoyBug(**{**card, "patches_only": True}))


def made_up(category: str) -> DecoyBug:
    """A decoy with a random id of its own, of ``category``."""
    return _planted(DecoyBug(id=f"decoy_{secrets.token_hex(4)}", title="decoy",
                             category=category, symptom="none",
                             check=SymptomCheck("final_loss", "higher"),
                             explanation="a no-op bug", buggy="", fixed="", onset=DECOY_ONSET))


def impersonated(scenarios: list, seeds: tuple[int, ...]) -> list:
    """Per model, the buggy scenario its decoy pair impersonates: drawn from the model's
    buggy scenarios of the sweep, the same for the same seeds (a resumed sweep plans it
    again), different for a new test split."""
    by_model: dict[str, list] = {}
    for s in scenarios:
        if not s.clean:
            by_model.setdefault(s.model, []).append(s)
    draw = random.Random(repr(seeds))
    return [draw.choice(sorted(group, key=lambda s: s.id)) for _, group in sorted(by_model.items())]
