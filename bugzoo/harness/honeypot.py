"""Honeypots: decoy bugs that look planted and change nothing.

A decoy is planted as a real bug is (patches of a seam of the loop and of the model's
``forward`` from its onset, the bug in its module's globals, the module's file name in their
code) and its replacements do exactly what the clean seams do. A sweep runs, per model, one
decoy pair that impersonates one of its buggy scenarios (the real id, card and settings),
armed and disarmed. Only a detector that reads which bug is planted, or which run of a pair
is armed, rather than what the run does, can score on those pairs; each board shows that
score as its honeypot column.
"""

from __future__ import annotations

import dataclasses
import random
import secrets

from bugzoo.bugs import Bug, SymptomCheck
from bugzoo.bugs.base import Clock, Patch, from_onset, patch_method, rebuilt_patch

TAG = "honeypot"  # a decoy run is stored as seed<k>.honeypot/ (its control .honeypot.control/)
DECOY_ONSET = 5  # where a made-up decoy's plant would start, if it did anything
# a seam of the loop and one of the model, each replaced by what the clean one does
_CLEAN_SEAMS = ("def zero_grad(self):\n"
                "    self.optimizer.zero_grad(set_to_none=True)  # what the clean seam does\n"
                "def forward(self, *args, **kwargs):\n"
                "    return type(self).forward(self, *args, **kwargs)  # the model's own\n")


class DecoyBug(Bug):
    """A bug planted as a real one is, on the loop and on the model, whose replacements do
    what the clean seams do."""

    def before_build(self, trainer) -> None:
        patch_method(trainer, "zero_grad", self.seams["zero_grad"], active=from_onset(trainer))

    def after_build(self, trainer) -> None:
        model = trainer.model
        model.forward = DecoyPatch(model, "forward", self.seams["forward"], from_onset(trainer))


class DecoyPatch(Patch):
    """A :class:`Patch` whose replacement was compiled at run time, so unpickling compiles it
    again rather than looking it up in the bug's module; it passes for a Patch by name."""

    def __reduce__(self):
        module = self.replacement.__globals__["__name__"]
        return _restore_decoy_patch, (self.owner, module, self.original, self.clock, self.armed)


DecoyPatch.__name__ = DecoyPatch.__qualname__ = Patch.__name__
DecoyPatch.__module__ = Patch.__module__


def _restore_decoy_patch(owner, module: str, original, clock: Clock | None,
                         armed: bool) -> DecoyPatch:
    return rebuilt_patch(DecoyPatch, owner, _clean_seams(module)["forward"], original, clock,
                         armed)


def _clean_seams(module: str, bug: Bug | None = None) -> dict:
    """The clean seams compiled as if from the bug module ``module`` (its file name in their
    code, ``bug`` as its ``BUG``)."""
    namespace: dict = {"__name__": module, "BUG": bug}
    exec(compile(_CLEAN_SEAMS, f"{module.replace('.', '/')}.py", "exec"), namespace)
    return {name: namespace[name] for name in ("zero_grad", "forward")}


def _planted(bug: DecoyBug) -> DecoyBug:
    """``bug`` with its no-op plants compiled as if from the bug's own module."""
    object.__setattr__(bug, "seams", _clean_seams(f"bugzoo.bugs.{bug.id}", bug))
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
