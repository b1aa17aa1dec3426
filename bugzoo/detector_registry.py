"""Which detectors exist, which a sweep runs, loading one by name, and what its parameters take.

Every detector, bugzoo's own included, is an entry point of the group ``bugzoo.detectors``: a
built-in is its file in ``detectors/`` plus one line in ``pyproject.toml``. Its Hydra config
(``detector=[name,...]``) is made from this registry (:mod:`bugzoo.config`).
"""

from __future__ import annotations

import difflib
import inspect
import logging
import typing
from collections.abc import Callable

from bugzoo.detector import Detector
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.registry import Registry

log = logging.getLogger(__name__)

DETECTORS = Registry("detector", "bugzoo.detectors")


def detector_class(name: str) -> type[Detector]:
    """The installed detector's class (imports its module)."""
    return DETECTORS.load(name)


def shipped_detectors() -> list[str]:
    """Detectors shipped in bugzoo's own distribution (built-ins, tool adapters, baselines)."""
    return [n for n in DETECTORS.names() if DETECTORS.is_own(n)]


def is_exclusive(name: str) -> bool:
    """Whether the named detector must watch a run of its own (``Detector.exclusive``)."""
    return bool(detector_class(name).exclusive)


def role_of(name: str) -> str:
    """The installed detector's role (``Detector.role``); imports its module."""
    return detector_class(name).role


def unavailable(name: str) -> str | None:
    """Why the installed detector ``name`` cannot run here, or ``None`` (imports its module)."""
    try:
        return detector_class(name).available()
    except ImportError as e:
        return f"cannot import detector {name}: {e}"


def _runnable(names: list[str]) -> list[str]:
    """``names`` minus those that cannot run here, each left out with its reason logged."""
    chosen = []
    for name in names:
        if reason := unavailable(name):
            log.warning("skipping detector %s: %s", name, reason)
        else:
            chosen.append(name)
    return chosen


def _shipped(role: str) -> list[str]:
    return [n for n in shipped_detectors() if role_of(n) == role]


# Words `--detectors` takes besides names. Outside plug-ins never join a plain bench: they run
# when named, or all together with `plugins`.
SELECTORS: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "default": ("what a plain bench runs: bugzoo's own detectors that run by default",
                lambda: [n for n in shipped_detectors() if detector_class(n).run_by_default]),
    "builtins": ("bugzoo's own heuristics", lambda: _shipped("heuristic")),
    "tools": ("adapters of existing tools, costly ones included", lambda: _shipped("tool")),
    "baselines": ("the trivial baselines (always, never, random)", lambda: _shipped("baseline")),
    "plugins": ("every detector installed by another distribution",
                lambda: [n for n in DETECTORS.names() if not DETECTORS.is_own(n)]),
}


def select_detectors(words: list[str] | None = None) -> list[str]:
    """Detector names from names and selectors (``SELECTORS``; commas separate words too), in
    order, without repeats; ``None`` or nothing is ``default``. A named detector that cannot
    run here is an error; one a selector brings in is left out with its reason logged."""
    installed = DETECTORS.names()
    chosen: list[str] = []
    for word in [w for arg in (words or ["default"]) for w in arg.split(",") if w]:
        if word in SELECTORS:
            chosen += _runnable(SELECTORS[word][1]())
        elif word in installed:
            if reason := unavailable(word):
                raise UsageError(f"detector {word} cannot run here: {reason}")
            chosen.append(word)
        else:
            raise _unknown_word(word, installed)
    return list(dict.fromkeys(chosen))


def _unknown_word(word: str, installed: list[str]) -> UsageError:
    """An error for a word that names no detector and no selector: the nearest of either,
    and how many detectors ``bugzoo list detectors`` lists (the selectors are not among them)."""
    selector = difflib.get_close_matches(word, list(SELECTORS), n=1, cutoff=0.6)
    named = difflib.get_close_matches(word, installed, n=1, cutoff=0.6)
    if selector and not named:
        return UsageError(f"unknown detector '{word}'; did you mean the selector "
                          f"'{selector[0]}'? (selectors: {', '.join(SELECTORS)}; "
                          f"`bugzoo list detectors` lists all {len(installed)} detectors)")
    return UsageError(f"{unknown_choice('detector', word, installed)}, or a selector: "
                      f"{', '.join(SELECTORS)}")


def default_detectors() -> list[str]:
    """What a plain ``bugzoo bench`` runs (the ``default`` selector)."""
    return select_detectors()


def load_detector(name: str, **params) -> Detector:
    """Import and instantiate one detector by its registered name, its ``params`` checked
    against its constructor (:func:`checked_params`)."""
    cls = detector_class(name)
    detector = cls(**checked_params(name, cls, params))
    detector.name = name
    return detector


SIMPLE_TYPES = (bool, int, float, str)


def checked_params(name: str, cls: type[Detector], params: dict) -> dict:
    """``params`` for ``cls(**params)``: each must be a parameter of its constructor (an
    unknown one is a UsageError with a "did you mean"), converted to the type it is annotated
    with where that is a plain ``bool``, ``int``, ``float`` or ``str`` (an int where a float
    goes; a value that does not convert is a UsageError naming the parameter)."""
    signature = inspect.signature(cls.__init__)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    known = [p for p in signature.parameters if p != "self"
             and signature.parameters[p].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                       inspect.Parameter.VAR_KEYWORD)]
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that does not resolve leaves the value as given
        hints = {}
    checked = {}
    for key, value in params.items():
        if key not in known:
            if takes_any:
                checked[key] = value
                continue
            error = unknown_choice(f"parameter of detector {name}", key, known) if known else \
                UsageError(f"detector {name} takes no parameters, got {key}")
            raise error
        checked[key] = _converted(name, key, value, hints.get(key))
    return checked


# The ranges of bugzoo's own detectors' numbers, kept here while their code is frozen for the
# out-of-sample board (detectors/ moves with the 2.0 release, when they join their classes as
# ``parameter_ranges``). By what each number is: a count of steps or checks is at least 1, a
# share or probability lies in [0, 1], a tolerance or scale is not negative, a "times the
# baseline" factor is at least 1.
BUILTIN_RANGES: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "attention_rows": {"every": (1, None), "tol": (0, None), "eps_units": (0, None)},
    "below_chance": {"fraction": (0, 1), "learned": (0, 1)},
    "cockpit": {"window": (1, None), "alpha_max": (0, None), "explode": (1, None),
                "every": (1, None)},
    "data_checks": {"overlap": (0, 1), "mean_tol": (0, None), "single_batches": (1, None)},
    "determinism": {"rel_tol": (0, None)},
    "fp16_scaling": {"min_scale": (0, None)},
    "grad_explosion": {"factor": (1, None), "window": (1, None), "warmup": (0, None),
                       "patience": (1, None)},
    "grad_vanishing": {"baseline": (1, None), "ratio": (0, 1), "patience": (1, None)},
    "initial_loss": {"high": (1, None), "low": (0, 1)},
    "input_bound": {"share": (0, 1), "window": (1, None)},
    "loss_forensics": {"window": (1, None), "diverge": (1, None), "spike_mads": (0, None),
                       "spike_ratio": (1, None), "spikes": (1, None), "oscillate": (0, None),
                       "undo": (0, 1)},
    "loss_plateau": {"window": (1, None), "min_rel_improvement": (0, 1), "high_frac": (0, 1)},
    "lr_schedule": {"flat": (1, None), "jump": (1, None), "tail": (0, 1)},
    "memory_growth": {"window": (1, None), "rising_share": (0, 1), "min_step_kib": (0, None)},
    "overfit_probe": {"examples": (1, None), "steps": (1, None), "lr": (0, None),
                      "target": (0, None)},
    "param_audit": {"frozen_share": (0, 1)},
    "random_alarm": {"p": (0, 1)},
    "rank_consistency": {"every": (1, None), "rel_tol": (0, None)},
    "update_ratio": {"low": (0, None), "high": (0, None), "window": (1, None), "lr_share": (0, 1),
                     "unlearned": (0, 1)},
    "watchdog": {"factor": (1, None), "min_gap_s": (0, None), "timeout_s": (0, None),
                 "poll_s": (0, None)},
}


def parameter_ranges(name: str) -> dict[str, tuple[float | None, float | None]]:
    """The values each number detector ``name`` takes may have: ``(lowest, highest)``, both
    inclusive, ``None`` for no bound. A plug-in declares them as its class's
    ``parameter_ranges``; bugzoo's own are :data:`BUILTIN_RANGES`."""
    if DETECTORS.is_own(name):
        return BUILTIN_RANGES.get(name, {})
    return dict(getattr(detector_class(name), "parameter_ranges", {}))


def user_params(name: str, params: dict) -> dict:
    """``params`` a user gave detector ``name`` (``bugzoo check detector NAME k=v``, ``bugzoo run
    detector.NAME.k=v``), checked as :func:`checked_params` does and against the range the
    detector declares for each (:func:`parameter_ranges`). A value outside is a UsageError,
    not a detector that never fires."""
    checked = checked_params(name, detector_class(name), params)
    for key, value in checked.items():
        bounds = parameter_ranges(name).get(key)
        if bounds is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        low, high = bounds
        if (low is None or value >= low) and (high is None or value <= high):
            continue
        allowed = (f"at least {low}" if high is None else f"at most {high}" if low is None
                   else f"between {low} and {high}")
        raise UsageError(f"detector {name}: {key} must be {allowed}, got {value}")
    return checked


def _converted(name: str, key: str, value, kind):
    """``value`` as the type ``kind`` (when it is a plain one), or a UsageError."""
    if kind not in SIMPLE_TYPES or isinstance(value, kind) and not (
            kind is int and isinstance(value, bool)):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is bool and str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    if kind in (int, float) and isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    raise UsageError(f"detector {name}: {key} must be {kind.__name__}, got {value!r}")
