"""User-facing errors: one line, exit code 2, no traceback (see ``bugzoo.cli``)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable


class UsageError(Exception):
    """Bad input from the user: unknown id, wrong value, unusable folder, malformed file."""


def choices_text(choices: Iterable[str], near: str | None = None, limit: int = 40) -> str:
    """``a, b, c``: sorted; of a long list, the ``limit`` choices nearest to ``near`` (or the
    first ones), then how many more there are."""
    choices = sorted(choices)
    if len(choices) <= limit:
        return ", ".join(choices)
    shown = choices[:limit]
    if near is not None:
        nearness = {c: difflib.SequenceMatcher(None, near, c).ratio() for c in choices}
        shown = sorted(sorted(choices, key=nearness.__getitem__, reverse=True)[:limit])
    return ", ".join(shown) + f", ... ({len(choices) - limit} more)"


def unknown_choice(kind: str, value: object, choices: Iterable[str]) -> UsageError:
    """An error for ``value`` not among ``choices``, with a "did you mean" when one is close."""
    choices = sorted(choices)
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return UsageError(f"unknown {kind} '{value}'{hint} "
                      f"(valid: {choices_text(choices, near=str(value))})")


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are UsageErrors (one line, exit 2) instead of usage dumps."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")
