"""What a planted bug is: its metadata, its symptom check, and how it patches a run.

A bug module defines ``BUG = SomeBug(...)`` where ``SomeBug`` subclasses :class:`Bug` and
overrides one or both hooks:

* ``before_build(trainer)`` runs before any part exists: patch a builder or a loop method,
  or change a setting (the mistake lives in configuration).
* ``after_build(trainer)`` runs once data, model, optimizer and loaders exist: edit them.

Patches should be minimal deltas of the clean code path and take effect at ``trainer.onset``.
:func:`patch_method` installs a replacement method that keeps the original's name and module,
so nothing a detector can read reveals which bug was planted.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bugzoo.train import Trainer

CATEGORIES = ("data", "model", "loss", "optim", "loop", "numerics", "precision", "distributed",
              "eval", "memory", "performance", "reproducibility")
ALL_MODELS = ("mlp", "lstm", "transformer", "resnet")


@dataclass(frozen=True)
class SymptomCheck:
    """How ``bugzoo validate`` proves a bug's symptom against clean runs of the same settings.

    ``metric`` names a summary field (see ``bugzoo.harness.record.summarize``); ``direction``
    says which way the buggy runs move: ``"lower"`` / ``"higher"`` for metrics compared with
    Mann-Whitney U, ``"event"`` for a boolean summary field compared with Fisher's exact test;
    ``"varies"`` runs each seed twice and tests (as an event) whether the metric differs
    between the two runs, e.g. ``trace_digest`` for reproducibility.
    """

    metric: str
    direction: str


@dataclass(frozen=True)
class Bug:
    """A planted training bug: metadata plus the patch that plants it.

    ``symptom`` says in words what a practitioner observes (loss, accuracy, divergence, hang,
    memory, time); ``check`` is how the benchmark proves that symptom over seeds.
    """

    id: str
    title: str
    category: str
    symptom: str
    check: SymptomCheck
    explanation: str
    buggy: str
    fixed: str
    models: tuple[str, ...] = ALL_MODELS
    onset: str = "present from step 0"
    loud: bool = False
    # whether the plant can wait for `bug.onset` (a mistake made at build time cannot): a run
    # asking a bug that does not for an onset other than 0 is refused with a one-line error
    honours_onset: bool = True
    requires: tuple[str, ...] = ()  # e.g. ("cuda",) or ("distributed",)
    references: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"bug {self.id}: category {self.category!r} not in {CATEGORIES}")
        unknown = set(self.models) - set(ALL_MODELS)
        if unknown:
            raise ValueError(f"bug {self.id}: unknown models {sorted(unknown)}")

    @property
    def needs_cuda(self) -> bool:
        return "cuda" in self.requires

    @property
    def buggy_puzzle(self) -> str:
        """The BUGGY snippet without its comments, which often name the mistake: what a
        spot-the-bug card shows before the reveal."""
        lines = (re.sub(r"(^|\s+)#.*$", "", line) for line in self.buggy.splitlines())
        return "\n".join(line for line in lines if line.strip())

    def before_build(self, trainer: Trainer) -> None:
        """Patch builders, loop methods or settings before the run's parts are built."""

    def after_build(self, trainer: Trainer) -> None:
        """Patch the built parts (model, optimizer, loaders, data)."""


def from_onset(trainer: Trainer) -> Callable[[], bool]:
    """``active`` for :func:`patch_method`: true from the run's onset step on."""
    return lambda: trainer.step >= trainer.onset


def patch_method(obj: Any, name: str, replacement: Callable,
                 active: Callable[[], bool] | None = None) -> None:
    """Replace ``obj.name`` with ``replacement`` (called with ``obj`` as ``self``).

    With ``active``, the original runs while ``active()`` is false, so a bug with a later onset
    leaves the run untouched until then. The wrapper borrows the original's name and module.
    """
    original = getattr(obj, name)
    buggy = types.MethodType(replacement, obj)

    def dispatch(*args, **kwargs):
        if active is None or active():
            return buggy(*args, **kwargs)
        return original(*args, **kwargs)

    dispatch.__name__ = original.__name__
    dispatch.__qualname__ = getattr(original, "__qualname__", original.__name__)
    dispatch.__module__ = original.__module__
    dispatch.__doc__ = original.__doc__
    setattr(obj, name, dispatch)
