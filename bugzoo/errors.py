"""User-facing errors: one line, exit code 2, no traceback (see ``bugzoo.cli``)."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable


class UsageError(Exception):
    """Bad input from the user: unknown id, wrong value, unusable folder, malformed file."""


# where the whole list of each kind of choice is, for an error that shows only the nearest
LISTINGS = {"scenario": "bugzoo list scenarios", "bug": "bugzoo list bugs",
            "detector": "bugzoo list detectors", "model": "bugzoo list models"}
SHOWN_IN_FULL = 12  # longer lists of choices: the 3 nearest and where the rest are


def unknown_choice(kind: str, value: object, choices: Iterable[str]) -> UsageError:
    """An error for ``value`` not among ``choices``, with a "did you mean" when one is close:
    the valid choices when they are few, else the 3 nearest and where to find them all."""
    choices = sorted(choices)
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    if len(choices) <= SHOWN_IN_FULL:
        return UsageError(f"unknown {kind} '{value}'{hint} (valid: {', '.join(choices)})")
    nearest = sorted(choices, key=lambda c: difflib.SequenceMatcher(None, str(value), c).ratio(),
                     reverse=True)[:3]
    listing = LISTINGS.get(kind.split()[-1])
    where = f"`{listing}` lists all {len(choices)}" if listing else (
        f"{len(choices)} in all")
    return UsageError(f"unknown {kind} '{value}'{hint} (valid: {', '.join(nearest)}, ...; "
                      f"{where})")


def plain(text: str | None) -> str | None:
    """``text`` without reStructuredText markup: ``code``, :role:`target`, `title`."""
    if text is None:
        return None
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"`{1,2}([^`]+)`{1,2}", r"\1", text)


class IncludeFolder(argparse.Action):
    """``--include DIR``: the folder's scenario files join the scenario path at once."""

    def __call__(self, parser, namespace, value, option_string=None) -> None:
        from bugzoo.paths import include  # here: bugzoo.paths imports this module

        include([value])
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), value])


class ArgumentParser(argparse.ArgumentParser):
    """The parser of every verb: its errors are UsageErrors (one line, exit 2) instead of usage
    dumps, its help is plain text, and it takes ``--include DIR`` as every verb does."""

    def __init__(self, *args, description: str | None = None, **kwargs):
        super().__init__(*args, description=plain(description), **kwargs)
        self.add_argument("--include", metavar="DIR", action=IncludeFolder,
                          help="also read scenario files from this folder (repeatable; as "
                          "BUGZOO_SCENARIO_PATH does)")

    def add_argument(self, *args, **kwargs):
        if "help" in kwargs:
            kwargs["help"] = plain(kwargs["help"])
        return super().add_argument(*args, **kwargs)

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")
