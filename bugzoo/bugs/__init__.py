"""The bug registry: one module per bug, module name == bug id == ``conf/bug/<id>.yaml``.

Ids are permanent. A retired bug keeps its module with ``retired="reason"`` in ``RETIRED``
below instead of being deleted or renumbered.
"""

from __future__ import annotations

import importlib
import pkgutil

from bugzoo.bugs.base import ALL_MODELS, CATEGORIES, Bug, SymptomCheck, patch_method
from bugzoo.errors import UsageError, unknown_choice

RETIRED: dict[str, str] = {}  # bug id -> reason it left the catalogue
_NOT_BUGS = {"base"}


def bug_ids() -> list[str]:
    """Ids of every bug in the catalogue (retired ones excluded), sorted."""
    found = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return sorted(n for n in found if n not in _NOT_BUGS and n not in RETIRED)


def get_bug(bug_id: str) -> Bug:
    """The bug with this id; unknown ids raise a UsageError with a "did you mean"."""
    if bug_id in RETIRED:
        raise UsageError(f"bug '{bug_id}' is retired: {RETIRED[bug_id]}")
    if bug_id not in bug_ids():
        raise unknown_choice("bug", bug_id, bug_ids())
    bug = importlib.import_module(f"{__name__}.{bug_id}").BUG
    if bug.id != bug_id:
        raise RuntimeError(f"module bugzoo.bugs.{bug_id} defines a bug with id {bug.id!r}")
    return bug


def list_bugs() -> list[Bug]:
    """Every bug in the catalogue, sorted by id."""
    return [get_bug(b) for b in bug_ids()]


def check_applies(bug: Bug, model: str) -> None:
    """Raise a UsageError when ``bug`` cannot be planted in ``model``."""
    if model not in bug.models:
        raise UsageError(f"bug '{bug.id}' does not apply to model '{model}' "
                         f"(it applies to: {', '.join(bug.models)})")


__all__ = ["ALL_MODELS", "CATEGORIES", "RETIRED", "Bug", "SymptomCheck", "bug_ids",
           "check_applies", "get_bug", "list_bugs", "patch_method"]
