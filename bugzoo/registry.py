"""One registry for each kind of plug-in: bugs, detectors and models.

A kind's members come from two places: the built-ins bugzoo ships (named by a function that
imports nothing) and the entry points of the kind's group, which any installed distribution
may declare in its ``pyproject.toml``. Listing names imports nothing; a member is imported when
it is first loaded. Every lookup of an unknown name is a one-line error with a "did you mean".
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from bugzoo import __version__
from bugzoo.errors import UsageError, unknown_choice

OWN_DISTRIBUTION = "bugzoo-bench"  # the distribution that ships bugzoo and its built-ins


class Registry:
    """The members of one kind of plug-in, by name.

    ``builtins`` maps each built-in's name to where it lives, ``"module"`` or
    ``"module:attribute"``, without importing it; ``group`` is the entry-point group other
    distributions register theirs under."""

    def __init__(self, kind: str, group: str,
                 builtins: Callable[[], Mapping[str, str]] = dict):
        self.kind, self.group, self._builtins = kind, group, builtins

    def entry_points(self) -> dict[str, EntryPoint]:
        """The group's entry points by name; a name two distributions register is a
        UsageError naming both. Scanning the installed distributions is slow next to a lookup,
        and a sweep worker looks names up many times a run, so the scan is cached for the
        current ``sys.path``: a plug-in put on the path later is still found."""
        return _entry_points(self.kind, self.group, tuple(sys.path))

    def builtins(self) -> Mapping[str, str]:
        return self._builtins()

    def names(self) -> list[str]:
        """Every member's name, sorted."""
        return sorted({*self.builtins(), *self.entry_points()})

    def __contains__(self, name: object) -> bool:
        return name in self.builtins() or name in self.entry_points()

    def check(self, name: str) -> None:
        """Raise a UsageError naming the valid choices when ``name`` is not a member."""
        if name not in self:
            raise unknown_choice(self.kind, name, self.names())

    def load(self, name: str) -> Any:
        """Import and return the member ``name`` (a built-in wins over an entry point)."""
        self.check(name)
        if name in (found := self.builtins()):
            module, _, attribute = found[name].partition(":")
            loaded = importlib.import_module(module)
            return getattr(loaded, attribute) if attribute else loaded
        return self.entry_points()[name].load()

    def provider(self, name: str) -> tuple[str, str]:
        """(distribution, version) that provides ``name``."""
        if name in self.builtins():
            return OWN_DISTRIBUTION, __version__
        self.check(name)
        return _provider(self.kind, self.group, tuple(sys.path), name)

    def is_own(self, name: str) -> bool:
        """Whether ``name`` ships with bugzoo (a built-in, or an entry point of bugzoo's own
        distribution)."""
        return self.provider(name)[0] == OWN_DISTRIBUTION


def distribution_of(ep: EntryPoint) -> str:
    """``package <name> <version>``: who installed an entry point, for messages."""
    return f"package {ep.dist.name} {ep.dist.version}" if ep.dist else "an unknown package"


@functools.lru_cache(maxsize=1024)
def _provider(kind: str, group: str, path: tuple[str, ...], name: str) -> tuple[str, str]:
    """Cached per ``sys.path`` as the scan is: a distribution's name and version are read from
    its metadata file on every access, and every run asks for each watching detector's."""
    dist = _entry_points(kind, group, path)[name].dist
    return (dist.name, dist.version) if dist is not None else ("unknown", "")


@functools.lru_cache(maxsize=16)
def _entry_points(kind: str, group: str, path: tuple[str, ...]) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: (e.name, distribution_of(e))):
        if ep.name in found and distribution_of(found[ep.name]) != distribution_of(ep):
            raise UsageError(f"{kind} id '{ep.name}' is registered twice: by "
                             f"{distribution_of(found[ep.name])} ({found[ep.name].value}) and "
                             f"by {distribution_of(ep)} ({ep.value})")
        found[ep.name] = ep
    return found
