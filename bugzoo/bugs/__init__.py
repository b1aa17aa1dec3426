"""The bug registry: the built-in catalogue and bug plug-ins from other packages.

A built-in bug is one module here (module name == bug id) plus its scenarios: the module holds
its card, its plant, its default ``onset`` and ``params`` and its export deltas. A plug-in bug
is the same, in another distribution, which registers it under the entry-point group
``bugzoo.bugs``: the entry point's name is the bug's namespaced id (``mylab/label_noise``) and
its value a :class:`Bug` object or a module holding ``BUG``. Built-in ids have no namespace, so
the two never collide. Both kinds reach Hydra's ``bug`` group through :mod:`bugzoo.config`.

Ids are permanent. A retired bug keeps its module with ``retired="reason"`` in ``RETIRED``
below instead of being deleted or renumbered.
"""

from __future__ import annotations

import functools
import pkgutil
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint

from bugzoo.bugs.base import ALL_MODELS, CATEGORIES, Bug, Delta, SymptomCheck, patch_method
from bugzoo.bugs.setup_delta import SetupDelta
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.registry import Registry, distribution_of

ENTRY_POINT_GROUP = "bugzoo.bugs"
PLUGIN_ID = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*")
RETIRED: dict[str, str] = {}  # bug id -> reason it left the catalogue
_NOT_BUGS = {"base", "setup_delta"}


@dataclass(frozen=True)
class Plugin:
    """A bug from another distribution: the Bug, its module and who installed it."""

    bug: Bug
    module: str
    package: str  # the distribution's name
    version: str


@functools.cache
def builtin_ids() -> tuple[str, ...]:
    """Ids of the built-in catalogue (retired ones excluded), sorted. The package's modules are
    scanned once per process: every config composition asks, and the files do not change."""
    found = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return tuple(sorted(n for n in found if n not in _NOT_BUGS and n not in RETIRED))


@functools.cache
def _builtin_homes() -> Mapping[str, str]:
    """Where each built-in bug lives, ``bugzoo.bugs.<id>:BUG``: made once, as every lookup of a
    bug by id reads it."""
    return types.MappingProxyType({bug_id: f"{__name__}.{bug_id}:BUG" for bug_id in builtin_ids()})


BUGS = Registry("bug", ENTRY_POINT_GROUP, _builtin_homes)


def plugins() -> dict[str, Plugin]:
    """Every installed bug plug-in by id, loaded and checked. A plug-in that fails to import,
    holds no Bug, has a malformed or duplicate id or an incomplete card is a UsageError naming
    its package. Cached for the current ``sys.path``, as the registry's scan is."""
    return _plugins_on(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _plugins_on(path: tuple[str, ...]) -> dict[str, Plugin]:
    return {name: _load_plugin(ep) for name, ep in BUGS.entry_points().items()}


def _load_plugin(ep: EntryPoint) -> Plugin:
    """The checked Bug behind one entry point of ``bugzoo.bugs``."""
    package = distribution_of(ep)
    if not PLUGIN_ID.fullmatch(ep.name):
        raise UsageError(f"bug plug-in '{ep.name}' from {package}: a plug-in's id is "
                         "'<namespace>/<name>' in lowercase letters, digits and _, "
                         "e.g. 'mylab/label_noise'")
    try:
        target = ep.load()
    except Exception as e:  # whatever the plug-in's import raises, it is the plug-in's fault
        raise UsageError(f"bug plug-in '{ep.name}' from {package} cannot be imported "
                         f"({ep.value}): {type(e).__name__}: {e}") from None
    bug = getattr(target, "BUG", None) if isinstance(target, types.ModuleType) else target
    if not isinstance(bug, Bug):
        raise UsageError(f"bug plug-in '{ep.name}' from {package}: {ep.value} is neither a "
                         "bugzoo.bugs.Bug nor a module holding one as BUG")
    if bug.id != ep.name:
        raise UsageError(f"bug plug-in '{ep.name}' from {package}: {ep.value} has id "
                         f"'{bug.id}'; the entry point's name must be the bug's id")
    if gaps := bug.card_gaps():
        raise UsageError(f"bug plug-in '{ep.name}' from {package}: incomplete card "
                         f"({', '.join(gaps)})")
    return Plugin(bug, ep.module, ep.dist.name if ep.dist else "", ep.dist.version if ep.dist
                  else "")


def bug_ids() -> list[str]:
    """Ids of every bug: the built-in catalogue, then installed plug-ins, sorted."""
    return sorted([*builtin_ids(), *plugins()])


def get_bug(bug_id: str) -> Bug:
    """The bug with this id; unknown ids raise a UsageError with a "did you mean"."""
    if bug_id in RETIRED:
        raise UsageError(f"bug '{bug_id}' is retired: {RETIRED[bug_id]}")
    if bug_id in (found := plugins()):
        return found[bug_id].bug
    if bug_id not in builtin_ids():
        raise unknown_choice("bug", bug_id, bug_ids())
    bug = BUGS.load(bug_id)
    if bug.id != bug_id:
        raise RuntimeError(f"module bugzoo.bugs.{bug_id} defines a bug with id {bug.id!r}")
    return bug


def list_bugs() -> list[Bug]:
    """Every bug, sorted by id (every bug module is imported)."""
    return [get_bug(b) for b in bug_ids()]


def bug_modules() -> set[str]:
    """The module of every bug: what ``sys.modules`` holds in every run, whichever is planted."""
    return {f"{__name__}.{b}" for b in builtin_ids()} | {p.module for p in plugins().values()}


def bug_config(bug_id: str) -> dict:
    """The ``bug`` node a run composes (``bug=<id>``): the id, and the Bug's own ``onset`` and
    ``params``, which a scenario may override."""
    bug = get_bug(bug_id)
    return {"id": bug.id, "onset": bug.onset, "params": dict(bug.params)}


def flat_id(bug_id: str) -> str:
    """The id as one file-name part: a plug-in's ``namespace/name`` is ``namespace--name``
    (scenario ids, curve figures, report pages)."""
    return bug_id.replace("/", "--")


def check_applies(bug: Bug, model: str) -> None:
    """Raise a UsageError when ``bug`` cannot be planted in ``model``."""
    if model not in bug.models:
        raise UsageError(f"bug '{bug.id}' does not apply to model '{model}' "
                         f"(it applies to: {', '.join(bug.models)})")


__all__ = ["ALL_MODELS", "CATEGORIES", "ENTRY_POINT_GROUP", "RETIRED", "Bug", "Delta", "Plugin",
           "SetupDelta", "SymptomCheck", "BUGS", "bug_config", "bug_ids", "bug_modules",
           "builtin_ids", "check_applies", "flat_id", "get_bug", "list_bugs", "patch_method",
           "plugins"]
