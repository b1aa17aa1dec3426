"""Command lines as results record them: quoted so that pasting one into a shell runs it."""

from __future__ import annotations

import shlex


def command_line(verb: str, argv: list[str]) -> str:
    """``bugzoo <verb> <argv>``, each word quoted where a shell would need it (a glob, a
    space)."""
    return shlex.join(["bugzoo", *verb.split(), *argv])
