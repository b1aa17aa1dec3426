"""Standalone reproducer templates for ``bugzoo export``: one module per model family.

Each module defines ``TEMPLATE`` (the fixed script, with ``${NAME}`` settings) and ``DELTAS``
(bug id -> :class:`Delta`): the buggy script is the fixed one plus a small textual patch.
A module may also define ``HEALTHY`` (variant name -> :class:`Delta`): clean scripts that differ
from the fixed one by a deliberate, harmless change (another batch size, optimizer, width).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Delta:
    """How one bug turns the fixed reproducer into the buggy one.

    ``patch`` holds (fixed text, buggy text) replacements, each matching exactly once;
    ``settings`` override the template's defaults in BOTH scripts (so they differ only by
    the patch).
    """

    patch: tuple[tuple[str, str], ...]
    settings: dict[str, object] = field(default_factory=dict)
