"""Command lines as results record them: what made a result, quoted so that pasting one into a
shell runs it."""

from __future__ import annotations

import shlex

HOW_NOT_WHAT = ("--no-progress",)  # options that change how a command runs, not what it makes
HOW_NOT_WHAT_VALUED = ("--workers",)  # the same, with a value


def command_line(verb: str, argv: list[str], leave_out: tuple[str, ...] = ()) -> str:
    """``bugzoo <verb> <argv>`` without the options that change only how it ran (the workers,
    the progress bar) and the valued options in ``leave_out``, each word quoted where a shell
    would need it (a glob, a space)."""
    valued = (*HOW_NOT_WHAT_VALUED, *leave_out)
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in valued:
            skip = True
        elif arg not in HOW_NOT_WHAT and not arg.startswith(
                tuple(f"{option}=" for option in valued)):
            kept.append(arg)
    return shlex.join(["bugzoo", *verb.split(), *kept])
