"""What a planted bug is: its metadata, its symptom check, and how it patches a run.

A bug module defines ``BUG = SomeBug(...)`` where ``SomeBug`` subclasses :class:`Bug` and
overrides one or both hooks:

* ``before_build(trainer)`` runs before any part exists: patch a builder or a loop method,
  or change a setting (the mistake lives in configuration).
* ``after_build(trainer)`` runs once data, model, optimizer and loaders exist: edit them.

Patches should be minimal deltas of the clean code path and take effect at ``trainer.onset``.
:func:`patch_method` installs a :class:`Patch` that passes for the method it replaces, so
nothing a detector can read reveals which bug was planted.

A buggy run's matched control is its **disarmed twin**: the same configuration, the same bug
object, and, for a bug whose every effect is a patch (``Bug.patches_only``), the same patches,
which never call their replacement (:func:`plants_disarmed`). Through the bug's identity, its
plant's code and the run's configuration, the control then looks like the buggy run; only the
effect is missing. In-process blindness is a rule these checks enforce, not a guarantee: code
in the same process can always find the flag that disarms a patch.
"""

from __future__ import annotations

import importlib
import re
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bugzoo.models import BUILTIN, MODELS
from bugzoo.taxonomy import declaration_problem

if TYPE_CHECKING:
    from bugzoo.train import Trainer

CATEGORIES = ("data", "model", "loss", "optim", "loop", "numerics", "precision", "distributed",
              "eval", "memory", "performance", "reproducibility")
ALL_MODELS = BUILTIN  # the models a bug applies to unless it says otherwise


# What a practitioner observes, and so what a symptom check may read: loss and accuracy,
# divergence, a crash or a hang, memory, time, and disagreement between runs ("varies"). Never
# the variable the bug sets (a learning rate, a mode flag, the ranks' parameters, the trace).
OUTCOMES = ("final_val_loss", "final_val_acc", "best_val_acc", "final_loss", "initial_loss",
            "initial_val_loss", "val_holdout_gap", "serving_gap", "generation_gap", "nonfinite",
            "crashed", "hung",
            "heap_growth_mb", "peak_rss_mb", "data_time_frac", "median_step_s", "startup_s")
DIRECTIONS = ("lower", "higher", "event", "varies")
CARD_TEXT = ("title", "symptom", "explanation", "buggy", "fixed")  # never empty


@dataclass(frozen=True)
class SymptomCheck:
    """How ``bugzoo results validate`` proves a bug's symptom against clean runs of the same
    settings.

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
class Delta:
    """How a bug turns a model's standalone reproducer (``bugzoo export``) from the fixed script
    into the buggy one.

    ``patch`` holds (fixed text, buggy text) replacements of the model's template, each
    matching exactly once; ``settings`` override the template's defaults in BOTH scripts, so
    that they differ only by the patch."""

    patch: tuple[tuple[str, str], ...]
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Bug:
    """A planted training bug: metadata plus the patch that plants it.

    ``symptom`` says in words what a practitioner observes (loss, accuracy, divergence, hang,
    memory, time); ``check`` is how the benchmark proves that symptom over seeds. ``onset`` and
    ``params`` are the run's ``bug.onset`` and ``bug.params`` unless a scenario sets them:
    ``onset`` is a step, or a ``${...}`` interpolation into the run settings (the step a
    schedule names); ``onset_note`` says in words when the mistake starts to matter, where the
    number alone does not tell. ``reproducers`` holds, per model with a reproducer template,
    the bug's :class:`Delta` for ``bugzoo export``. ``taxonomy`` names the leaves of the
    published fault taxonomies the bug plants (:mod:`bugzoo.taxonomy`): each key maps to
    ``"literal"`` or ``"partial: <how the plant differs>"``.
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
    # models the mistake cannot be made on, each with why (the causal LM above all: a bug of
    # classifiers says why it does not apply to a language model)
    inapplicable: Mapping[str, str] = field(default_factory=dict, compare=False)
    onset: int | str = 0
    onset_note: str = ""
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    loud: bool = False
    # whether the plant can wait for `bug.onset` (a mistake made at build time cannot): a run
    # asking a bug that does not for an onset other than 0 is refused with a one-line error
    honours_onset: bool = True
    requires: tuple[str, ...] = ()  # e.g. ("cuda",) or ("distributed",)
    references: tuple[str, ...] = field(default_factory=tuple)
    reproducers: Mapping[str, Delta] = field(default_factory=dict, compare=False)
    # True when every effect of the plant goes through patch_method, so a matched control can
    # carry the same patches disarmed; False for a plant that also edits the built run directly
    # (its control runs without the plant). tests/test_integrity.py holds each bug to it.
    patches_only: bool = True
    since: str = "1.0"  # the release of bugzoo-bench the bug joined
    taxonomy: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"bug {self.id}: category {self.category!r} not in {CATEGORIES}")
        unknown = (set(self.models) | set(self.inapplicable)) - set(MODELS.names())
        if unknown:
            raise ValueError(f"bug {self.id}: unknown models {sorted(unknown)}")
        if not (isinstance(self.onset, int) and self.onset >= 0
                or isinstance(self.onset, str) and self.onset.startswith("${")):
            raise ValueError(f"bug {self.id}: onset must be a step or a ${{...}} interpolation "
                             f"into the run settings, not {self.onset!r}")
        if both := set(self.models) & set(self.inapplicable):
            raise ValueError(f"bug {self.id}: {sorted(both)} both in models and inapplicable")
        for key, value in self.taxonomy.items():
            if problem := declaration_problem(key, value):
                raise ValueError(f"bug {self.id}: {problem}")
        deltas = {model: delta if isinstance(delta, Delta) else Delta(tuple(map(tuple, delta)))
                  for model, delta in self.reproducers.items()}  # a plug-in may give pairs
        object.__setattr__(self, "reproducers", deltas)

    @property
    def onset_text(self) -> str:
        """When the mistake is there, in words: the step, or the setting that names it."""
        if not self.honours_onset:
            when = "from the start: it is made when the run is built"
        elif isinstance(self.onset, str):
            when = f"from the step `{self.onset[2:-1]}` names"
        else:
            when = f"from step {self.onset}"
        return f"{when}; {self.onset_note}" if self.onset_note else when

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


_ARMED: ContextVar[bool] = ContextVar("plants_armed", default=True)


@contextmanager
def plants_disarmed(disarmed: bool = True) -> Iterator[None]:
    """Patches installed inside the block never call their replacement: how a matched control
    carries its buggy twin's plant without its effect."""
    token = _ARMED.set(not disarmed)
    try:
        yield
    finally:
        _ARMED.reset(token)


class Patch:
    """A method of one object replaced by a planted bug, bound to that object.

    It passes for the method it replaces (same name, qualified name, module and docstring), is
    copied with its object by ``copy.deepcopy`` (the copy calls the copy, never the live
    object) and pickles with it (``torch.save``) when the replacement is a module-level
    function. Before its clock starts, and always when it was installed disarmed
    (:func:`plants_disarmed`), it runs the original method.
    """

    def __init__(self, owner: Any, name: str, replacement: Callable, clock: Clock | None):
        current = getattr(owner, name)
        self.owner, self.clock, self.armed = owner, clock, _ARMED.get()
        # the method the object had: an earlier patch, or its class's function
        self.original = current if isinstance(current, Patch) else current.__func__
        self.replacement = _disguised(replacement, self.original)
        for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
            setattr(self, attribute, getattr(self.original, attribute, None))

    def __call__(self, *args, **kwargs):
        if self.armed and (self.clock is None or self.clock.started()):
            return self.replacement(self.owner, *args, **kwargs)
        if isinstance(self.original, Patch):
            return self.original(*args, **kwargs)
        return self.original(self.owner, *args, **kwargs)

    def __reduce__(self):
        true_home = (self.replacement.__globals__["__name__"],
                     self.replacement.__code__.co_qualname)
        return _restore_patch, (self.owner, true_home, self.original, self.clock, self.armed)


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
                   clock: Clock | None, armed: bool = True) -> Patch:
    """Unpickle a :class:`Patch`: look its replacement up where it was defined."""
    module, qualname = true_home
    replacement = importlib.import_module(module)
    for part in qualname.split("."):
        replacement = getattr(replacement, part)
    patch = Patch.__new__(Patch)
    patch.owner, patch.clock, patch.original, patch.armed = owner, clock, original, armed
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
