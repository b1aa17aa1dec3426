"""Which detectors exist, which a sweep runs, and loading one by name.

Every detector, bugzoo's own included, is an entry point of the group ``bugzoo.detectors``: a
built-in is its file in ``detectors/`` plus one line in ``pyproject.toml``. Its Hydra config
(``detector=[name,...]``) is made from this registry (:mod:`bugzoo.config`).
"""

from __future__ import annotations

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
            raise unknown_choice("detector", word, [*installed, *SELECTORS])
    return list(dict.fromkeys(chosen))


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
