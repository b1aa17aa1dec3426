"""The detector plug-in interface: what a debugging tool implements to be benchmarked.

Lifecycle, in the spirit of scikit-learn estimators:

* ``__init__(**params)`` only stores parameters;
* ``setup(run)`` receives the live :class:`RunView` and creates all state; it may register
  hooks (use :meth:`Detector.hook` so they are timed, isolated and removed). A sealed
  detector (``sealed = True``) receives the run's :class:`~bugzoo.trace.RunFacts` only, and is
  scored on stored traces outside the training process;
* ``observe(obs)`` is called once per step and returns the alarms raised at that step;
* ``teardown()`` removes everything the detector attached.

Detectors are registered through the entry-point group ``bugzoo.detectors``
(:mod:`bugzoo.detector_registry` finds, chooses and loads them).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from bugzoo.bugs.base import CATEGORIES
from bugzoo.telemetry import Observation


@dataclass(frozen=True)
class Alarm:
    """A detector's claim that something is wrong, from ``step`` on.

    * ``step``: the step at which the detector saw it (an int in [0, current step]);
    * ``symptom``: a short name for what it observed, e.g. ``"loss_plateau"``;
    * ``category``: the suspected cause, one of ``bugzoo.bugs.CATEGORIES`` or ``"unknown"``;
      the benchmark scores it as the diagnosis;
    * ``message``: one line for a person.
    """

    step: int
    symptom: str
    category: str
    message: str


@dataclass
class RunView:
    """The live run as a detector sees it. Nothing here names the planted bug.

    * ``model``, ``optimizer``, ``loss_fn``: the run's own objects (``loss_fn`` is an
      ``nn.Module``; under distributed training ``model`` is the DDP wrapper);
    * ``train_loader``, ``val_loader``: ``bugzoo.data.BatchLoader`` objects; ``loader.split``
      holds the split's tensors (``x``, ``y``, ``lengths``). Iterating a loader advances its
      generator, so read ``split`` instead;
    * ``device``: the ``torch.device`` the model trains on;
    * ``num_classes``: classes of the task (the expected first loss is ``log(num_classes)``);
    * ``steps``: how many optimizer steps the run will make;
    * ``model_name``, ``dataset``: which reference model and dataset (``"mlp"``, ``"tabular"``);
    * ``lr_scheduler``: the scheduler, or ``None`` for a constant learning rate;
    * ``loss_floor``: the lowest value the training loss can take (0 for cross-entropy; the
      smoothed targets' entropy under label smoothing);
    * ``twin_losses``: the training losses of the first steps of a twin run, a second copy of
      this run trained from the same seed with nothing watching, before this one starts; as
      many as the watching detectors' largest ``twin_steps``. ``None`` when no detector asks,
      under distributed training, in the framework integrations and in replay.

    A sealed detector (``Detector.sealed``) gets a :class:`bugzoo.trace.RunFacts` instead:
    the plain facts alone.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: nn.Module
    train_loader: Any
    val_loader: Any
    device: torch.device
    num_classes: int
    steps: int
    model_name: str
    dataset: str
    lr_scheduler: Any = None
    loss_floor: float = 0.0
    twin_losses: list[float] | None = None


def is_sealed(cls: type[Detector]) -> bool:
    """Whether a detector class is sealed; the 1.x spelling ``observation_only`` still counts
    for one release, with a notice."""
    if not cls.sealed and getattr(cls, "observation_only", False):
        warnings.warn(f"{cls.__name__}: `observation_only = True` is now `sealed = True`; the "
                      "old spelling is read until bugzoo-bench 2.1", DeprecationWarning,
                      stacklevel=2)
        return True
    return bool(cls.sealed)


class Detector:
    """Base class for detectors. Subclasses override ``setup``, ``observe`` and maybe others."""

    name: str = "detector"
    # What it is, for the leaderboard and its suites: "heuristic" (a check written to catch
    # training bugs), "tool" (an existing tool used as it is: PyTorch's anomaly mode, a recipe
    # as the reference notes write it, a third-party debugger) or "baseline" (a trivial
    # reference that detects nothing: scored beside the others, never a suite member).
    role: str = "heuristic"
    # What it watches, for the leaderboard's "suite: generic": "generic" (a general signal:
    # loss, gradients, updates, numerics, memory, time) or "targeted" (one known mistake)
    scope: str = "generic"
    # False for costly optional tools: a plain `bugzoo bench` leaves them out; name them
    run_by_default: bool = True
    # True when watching can change how the run goes (e.g. turn a NaN into an exception): the
    # harness then gives the detector a run of its own, so it cannot cut other detectors short
    exclusive: bool = False
    # How many steps of a twin run (RunView.twin_losses) the detector needs to see: the harness
    # then trains a second copy of the run from the same seed for that many steps before the
    # watched run starts, and charges the time to the detectors that asked
    twin_steps: int = 0
    # True for a sealed detector: a function of the trace (bugzoo.trace). Its ``setup`` gets
    # the run's plain facts (a RunFacts: ``num_classes``, ``steps``, ``model_name``,
    # ``dataset``, ``loss_floor``, ``device``), ``observe`` each record; no hooks, model,
    # optimizer, loaders, twin run or wall clock. It is scored outside the training process,
    # confined (bugzoo.judge.sealed), and gives the same alarms on a stored trace as live.
    sealed: bool = False
    # Why a detector that is not sealed must instrument the live process; it is scored on the
    # live board, "in-process: trusted, not sealed"
    live_reason: str = ""
    # True when the detector must run on every rank of a distributed run because it takes part
    # in collectives (an all-gather across ranks); only rank 0's alarms and status are kept
    all_ranks: bool = False

    @staticmethod
    def available() -> str | None:
        """Why this detector cannot run here (e.g. its optional tool is not installed), or None."""
        return None

    def setup(self, run: RunView) -> None:
        self.run = run
        self.handles: list[RemovableHandle] = []
        self.pending: list[Alarm] = []
        self.hook_seconds = 0.0
        self.hook_errors: list[str] = []

    def observe(self, obs: Observation) -> list[Alarm]:
        """Look at one step; return the alarms raised (including any queued by hooks)."""
        return self.flush()

    def teardown(self) -> list[Alarm]:
        """Remove every hook registered through :meth:`hook`; return the alarms hooks queued
        since the last ``observe`` (the step that crashed the run may have raised some)."""
        for handle in getattr(self, "handles", []):
            handle.remove()
        self.handles = []
        return self.flush() if hasattr(self, "pending") else []

    # ------------------------------------------------------------------ helpers
    def alarm(self, step: int, symptom: str, category: str, message: str) -> Alarm:
        if category not in CATEGORIES and category != "unknown":
            raise ValueError(f"alarm category {category!r} not in {CATEGORIES} or 'unknown'")
        return Alarm(int(step), symptom, category, message)

    def queue(self, alarm: Alarm) -> None:
        """Keep an alarm raised inside a hook until the next ``observe``."""
        self.pending.append(alarm)

    def flush(self) -> list[Alarm]:
        out, self.pending = self.pending, []
        return out

    def hook(self, register: Callable[[Callable], RemovableHandle], fn: Callable) -> None:
        """Register ``fn`` through ``register`` (e.g. ``module.register_forward_hook``).

        The hook's time is charged to this detector and an exception inside it is recorded
        instead of breaking the training step.
        """

        def guarded(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # a detector must never sink the run
                self.hook_errors.append(f"{type(e).__name__}: {e}")
                return None
            finally:
                self.hook_seconds += time.perf_counter() - t0

        self.handles.append(register(guarded))
