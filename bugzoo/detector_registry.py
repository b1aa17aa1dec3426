"""Which detectors exist, which a sweep runs, and loading one by name.

Every detector, bugzoo's own included, is an entry point of the group ``bugzoo.detectors``: a
built-in is its file in ``detectors/`` plus one line in ``pyproject.toml``. Its Hydra config
(``detector=[name,...]``) is made from this registry (:mod:`bugzoo.config`).
"""

from __future__ import annotations

import logging
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
    """Import and instantiate one detector by its registered name."""
    detector = detector_class(name)(**params)
    detector.name = name
    return detector
