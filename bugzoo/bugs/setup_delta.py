"""An export delta whose fixed script is the template with a feature written into it.

Most export deltas (:class:`~bugzoo.bugs.base.Delta`) take the template as the fixed script
and patch the buggy one from it. Some mistakes live in a feature the template does not have:
early stopping, gradient accumulation, a resume from a checkpoint, a warm-up freeze. The fixed
script of such a bug is the template with the feature done right, and the buggy one is the same
script with the mistake in it.

This class lives beside :mod:`bugzoo.bugs.base` rather than in ``Delta`` because ``base.py``
is part of the release hash, and an export delta makes scripts, never runs. A bug module
imports it on a line of its own (``from bugzoo.bugs import SetupDelta``), which the release
hash cuts with the delta (:func:`bugzoo.release.without_export_deltas`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bugzoo.bugs.base import Delta


@dataclass(frozen=True)
class SetupDelta(Delta):
    """A :class:`Delta` with ``setup``: (template text, fixed text) replacements, each matching
    the template exactly once, that make the fixed script. ``patch`` then applies to the fixed
    script to make the buggy one, and ``settings`` apply to both."""

    setup: tuple[tuple[str, str], ...] = ()
