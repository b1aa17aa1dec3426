"""Generated blocks in Markdown pages: the text between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->`` is written by code, never by hand, and tests check it is current."""

from __future__ import annotations

import re


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- {re.escape(name)}:start -->\n)(.*?)(<!-- {re.escape(name)}:end -->)",
                      re.S)


def block(text: str, name: str) -> str | None:
    """The content of block ``name`` in ``text``, or None when it has no such block."""
    found = _pattern(name).search(text)
    return found.group(2).rstrip("\n") if found else None


def with_block(text: str, name: str, content: str) -> str:
    """``text`` with block ``name``'s content replaced by ``content``."""
    if block(text, name) is None:
        raise ValueError(f"no block {name!r} (<!-- {name}:start --> ... <!-- {name}:end -->)")
    return _pattern(name).sub(lambda m: m.group(1) + content.rstrip("\n") + "\n" + m.group(3),
                              text, count=1)
