"""The bug registry: the built-in catalogue and bug plug-ins from other packages.

A built-in bug is one module here: module name == bug id == ``conf/bug/<id>.yaml``. A plug-in
bug lives in another distribution, which registers it under the entry-point group
``bugzoo.bugs``: the entry point's name is the bug's namespaced id (``mylab/label_noise``) and
its value a :class:`Bug` object or a module holding ``BUG``; its onset and params are the Bug's
``default_onset`` and ``default_params``. Built-in ids have no namespace, so the two never
collide.

Ids are permanent. A retired bug keeps its module with ``retired="reason"`` in ``RETIRED``
below instead of being deleted or renumbered.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import sys
import types
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

import yaml

from bugzoo.bugs.base import ALL_MODELS, CATEGORIES, Bug, SymptomCheck, patch_method
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.paths import CONF_DIR

ENTRY_POINT_GROUP = "bugzoo.bugs"
OWN_DISTRIBUTION = "bugzoo-bench"  # the distribution that ships the built-in catalogue
PLUGIN_ID = re.compile(r"[a-z][a-z0-9_]*/[a-z][a-z0-9_]*")
RETIRED: dict[str, str] = {}  # bug id -> reason it left the catalogue
_NOT_BUGS = {"base"}


@dataclass(frozen=True)
class Plugin:
    """A bug from another distribution: the Bug, its module and who installed it."""

    bug: Bug
    module: str
    package: str  # the distribution's name
    version: str


def builtin_ids() -> list[str]:
    """Ids of the built-in catalogue (retired ones excluded), sorted."""
    found = (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return sorted(n for n in found if n not in _NOT_BUGS and n not in RETIRED)


def plugins() -> dict[str, Plugin]:
    """Every installed bug plug-in by id, loaded and checked. A plug-in that fails to import,
    holds no Bug, has a malformed or duplicate id or an incomplete card is a UsageError naming
    its package. Cached for the current ``sys.path``, as detectors are."""
    return _plugins_on(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _plugins_on(path: tuple[str, ...]) -> dict[str, Plugin]:
    found: dict[str, Plugin] = {}
    where: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda e: (e.name, e.dist.name if e.dist else "")):
        if ep.name in where:
            raise UsageError(f"bug id '{ep.name}' is registered twice: by {where[ep.name]} "
                             f"and by {_package(ep)} ({ep.value})")
        where[ep.name] = f"{_package(ep)} ({ep.value})"
        found[ep.name] = _load_plugin(ep)
    return found


def _package(ep: EntryPoint) -> str:
    """``package <name> <version>``: who installed an entry point, for error messages."""
    return f"package {ep.dist.name} {ep.dist.version}" if ep.dist else "an unknown package"


def _load_plugin(ep: EntryPoint) -> Plugin:
    """The checked Bug behind one entry point of ``bugzoo.bugs``."""
    package = _package(ep)
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
    bug = importlib.import_module(f"{__name__}.{bug_id}").BUG
    if bug.id != bug_id:
        raise RuntimeError(f"module bugzoo.bugs.{bug_id} defines a bug with id {bug.id!r}")
    return bug


def list_bugs() -> list[Bug]:
    """Every bug, sorted by id (every bug module is imported)."""
    return [get_bug(b) for b in bug_ids()]


def provider(bug_id: str) -> str:
    """The distribution that provides the bug (``bugzoo-bench`` for the built-ins)."""
    return plugins()[bug_id].package if bug_id in plugins() else OWN_DISTRIBUTION


def bug_modules() -> set[str]:
    """The module of every bug: what ``sys.modules`` holds in every run, whichever is planted."""
    return {f"{__name__}.{b}" for b in builtin_ids()} | {p.module for p in plugins().values()}


def bug_config(bug_id: str) -> dict:
    """The ``bug`` node a run composes: ``conf/bug/<id>.yaml`` for a built-in, the Bug's own
    ``default_onset`` and ``default_params`` for a plug-in."""
    if bug_id in (found := plugins()):
        bug = found[bug_id].bug
        return {"id": bug.id, "onset": bug.default_onset, "params": dict(bug.default_params)}
    return _builtin_config(bug_id)


@functools.cache
def _builtin_config(bug_id: str) -> dict:
    return yaml.safe_load((CONF_DIR / "bug" / f"{bug_id}.yaml").read_text())


def flat_id(bug_id: str) -> str:
    """The id as one file-name part: a plug-in's ``namespace/name`` is ``namespace--name``
    (scenario ids, curve figures, report pages)."""
    return bug_id.replace("/", "--")


def check_applies(bug: Bug, model: str) -> None:
    """Raise a UsageError when ``bug`` cannot be planted in ``model``."""
    if model not in bug.models:
        raise UsageError(f"bug '{bug.id}' does not apply to model '{model}' "
                         f"(it applies to: {', '.join(bug.models)})")


__all__ = ["ALL_MODELS", "CATEGORIES", "ENTRY_POINT_GROUP", "RETIRED", "Bug", "Plugin",
           "SymptomCheck", "bug_config", "bug_ids", "bug_modules", "builtin_ids",
           "check_applies", "flat_id", "get_bug", "list_bugs", "patch_method", "plugins",
           "provider"]
