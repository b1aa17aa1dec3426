"""What a planted bug is: its metadata, its symptom check, and how it patches a run.

A bug module defines ``BUG = SomeBug(...)`` where ``SomeBug`` subclasses :class:`Bug` and
overrides one or both hooks:

* ``before_build(trainer)`` runs before any part exists: patch a builder or a loop method,
  or change a setting (the mistake lives in configuration).
* ``after_build(trainer)`` runs once data, model, optimizer and loaders exist: edit them.

Patches should be minimal deltas of the clean code path and take effect at ``trainer.onset``.
:func:`patch_method` installs a :class:`Patch` that passes for the method it replaces, so
nothing a detector can read reveals which bug was planted.
"""

from __future__ import annotations

import importlib
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bugzoo.train import Trainer

CATEGORIES = ("data", "model", "loss", "optim", "loop", "numerics", "precision", "distributed",
              "eval", "memory", "performance", "reproducibility")
ALL_MODELS = ("mlp", "lstm", "transformer", "resnet")


# What a practitioner observes, and so what a symptom check may read: loss and accuracy,
# divergence, a crash or a hang, memory, time, and disagreement between runs ("varies"). Never
# the variable the bug sets (a learning rate, a mode flag, the ranks' parameters, the trace).
OUTCOMES = ("final_val_loss", "final_val_acc", "best_val_acc", "final_loss", "initial_loss",
            "val_holdout_gap", "serving_gap", "nonfinite", "crashed", "hung", "heap_growth_mb",
            "peak_rss_mb", "data_time_frac", "median_step_s")
DIRECTIONS = ("lower", "higher", "event", "varies")
CARD_TEXT = ("title", "symptom", "explanation", "buggy", "fixed", "onset")  # never empty


@dataclass(frozen=True)
class SymptomCheck:
    """How ``bugzoo validate`` proves a bug's symptom against clean runs of the same settings.

    ``metric`` names an outcome of the run's summary (one of ``OUTCOMES``); ``direction`` says
    which way the buggy runs move: ``"lower"`` / ``"higher"`` for metrics compared with an
    exact permutation test of ranks, ``"event"`` for a boolean outcome compared with Fisher's
    exact test; ``"varies"`` runs each seed twice and tests (as an event) whether the metric
    differs between the two runs, e.g. the final validation loss for reproducibility.
    """

    metric: str
    direction: str

    def __post_init__(self) -> None:
        if self.metric not in OUTCOMES:
            raise ValueError(f"a symptom check reads an outcome ({', '.join(OUTCOMES)}), "
                             f"not {self.metric!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} not in {DIRECTIONS}")


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
    # a plug-in bug's run parameters (a built-in's are in conf/bug/<id>.yaml): the step it
    # starts at unless a scenario says otherwise, and the `bug.params` its plant reads
    default_onset: int = 0
    default_params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # a plug-in bug's `bugzoo export` patch, per model with a reproducer template: (fixed text,
    # buggy text) replacements of that template, each matching once (a built-in's are kept with
    # the templates, in bugzoo/teach/reproducers/)
    reproducers: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict,
                                                                   compare=False)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"bug {self.id}: category {self.category!r} not in {CATEGORIES}")
        unknown = set(self.models) - set(ALL_MODELS)
        if unknown:
            raise ValueError(f"bug {self.id}: unknown models {sorted(unknown)}")

    def card_gaps(self) -> list[str]:
        """What the card lacks: its empty text fields, no models, a check that is no
        :class:`SymptomCheck` (empty when the card is complete)."""
        gaps = [f"empty {name}" for name in CARD_TEXT if not str(getattr(self, name)).strip()]
        if not self.models:
            gaps.append("no models")
        if not isinstance(self.check, SymptomCheck):
            gaps.append(f"check is a {type(self.check).__name__}, not a SymptomCheck")
        return gaps

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


@dataclass
class Clock:
    """The run's step as plants see it: a patch that waits for its onset reads this, never the
    trainer, so nothing reachable from a patched model leads to the run's configuration. It is
    copied with whatever holds it: a deep copy of a patched model keeps its own, frozen time."""

    onset: int
    step: int = 0

    def started(self) -> bool:
        return self.step >= self.onset


def from_onset(trainer: Trainer) -> Clock:
    """``active`` for :func:`patch_method`: the run's clock, started from its onset step on."""
    return trainer.clock


class Patch:
    """A method of one object replaced by a planted bug, bound to that object.

    It passes for the method it replaces (same name, qualified name, module and docstring), is
    copied with its object by ``copy.deepcopy`` (the copy calls the copy, never the live
    object) and pickles with it (``torch.save``) when the replacement is a module-level
    function. Before its clock starts it runs the original method.
    """

    def __init__(self, owner: Any, name: str, replacement: Callable, clock: Clock | None):
        current = getattr(owner, name)
        self.owner, self.clock = owner, clock
        # the method the object had: an earlier patch, or its class's function
        self.original = current if isinstance(current, Patch) else current.__func__
        self.replacement = _disguised(replacement, self.original)
        for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
            setattr(self, attribute, getattr(self.original, attribute, None))

    def __call__(self, *args, **kwargs):
        if self.clock is None or self.clock.started():
            return self.replacement(self.owner, *args, **kwargs)
        if isinstance(self.original, Patch):
            return self.original(*args, **kwargs)
        return self.original(self.owner, *args, **kwargs)

    def __reduce__(self):
        true_home = (self.replacement.__globals__["__name__"],
                     self.replacement.__code__.co_qualname)
        return _restore_patch, (self.owner, true_home, self.original, self.clock)


def _disguised(function: Callable, original: Callable) -> Callable:
    """A copy of ``function`` that names itself after ``original`` (the bug's module and
    function names are not left for a detector to read off the patched object)."""
    copy = types.FunctionType(function.__code__, function.__globals__, original.__name__,
                              function.__defaults__, function.__closure__)
    copy.__qualname__ = original.__qualname__
    copy.__module__ = original.__module__
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _restore_patch(owner: Any, true_home: tuple[str, str], original: Callable,
                   clock: Clock | None) -> Patch:
    """Unpickle a :class:`Patch`: look its replacement up where it was defined."""
    module, qualname = true_home
    replacement = importlib.import_module(module)
    for part in qualname.split("."):
        replacement = getattr(replacement, part)
    patch = Patch.__new__(Patch)
    patch.owner, patch.clock, patch.original = owner, clock, original
    patch.replacement = _disguised(replacement, original)
    for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(patch, attribute, getattr(original, attribute, None))
    return patch


def patch_method(obj: Any, name: str, replacement: Callable, active: Clock | None = None
                 ) -> None:
    """Replace ``obj.name`` with ``replacement`` (called with ``obj`` as ``self``).

    With ``active`` (the run's clock, :func:`from_onset`), the original runs until the clock
    reaches the onset, so a bug with a later onset leaves the run untouched until then.
    Replacements of model or data methods must be module-level functions that read everything
    from ``self``: a closure would tie a copied model to the live run.
    """
    setattr(obj, name, Patch(obj, name, replacement, active))
