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
    """Whether a detector class is sealed: ``sealed``, or its 1.x spelling
    ``observation_only``, which the built-ins keep until the 2.0 release re-measures them (their
    code is frozen for the out-of-sample board, so their files do not change before it)."""
    return bool(cls.sealed or cls.observation_only)


def live_reason(cls: type[Detector]) -> str:
    """Why a detector that is not sealed must instrument the live process (``live_reason``, or
    for a frozen built-in, :data:`BUILTIN_LIVE_REASONS`); "" for a sealed one."""
    if is_sealed(cls):
        return ""
    return cls.live_reason or BUILTIN_LIVE_REASONS.get(cls.__qualname__, "")


# The built-ins' reasons, kept here while their files are frozen (see is_sealed); the 2.0
# release moves each into its class as ``live_reason``.
BUILTIN_LIVE_REASONS = {
    "AnomalyMode": "runs autograd's anomaly mode inside the training process",
    "AttentionRows": "reads attention weights through forward hooks on the model",
    "CEProbabilities": "reads the loss function's inputs through a hook",
    "Cockpit": "instruments every backward pass with BackPACK",
    "DataChecks": "reads the training and validation batches held by the loaders",
    "Determinism": "compares the run with a twin trained from the same seed",
    "FP16Scaling": "reads the dtypes of the model's parameters",
    "IsFiniteHooks": "checks every module's outputs through forward hooks",
    "NanHooks": "checks every module's outputs through forward hooks",
    "LRSchedule": "reads whether the run has a scheduler object",
    "ModeCheck": "reads each module's train or eval mode at each phase",
    "OverfitProbe": "trains a copy of the model on one batch (an active probe)",
    "ParamAudit": "compares the model's parameters with the optimizer's groups",
    "RankConsistency": "takes part in collectives across the ranks of a distributed run",
    "StaleGrads": "reads the gradients before each backward through hooks",
    "Watchdog": "keeps a heartbeat on the live process's wall clock",
    "RandomAlarm": "seeds its coin with the run's initial weights, which the trace does not hold",
    "SettingsReader": "reads the run's optimizer, loaders and model, as a cheat would",
}


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
    observation_only: bool = False  # the 1.x spelling of ``sealed``, still read
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
