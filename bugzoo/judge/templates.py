"""Pages of ``results/`` as Jinja templates: the prose lives in ``templates/*.md.j2``, and a
page writer hands its template the tables and counts it computed.

A template writes its prose wrapped, for reading; ``{% filter paragraph %}`` joins such a
paragraph into the one line a page has per paragraph.
"""

from __future__ import annotations

import re
from functools import cache

import jinja2

FOLDER = "templates"


def paragraph(text: str) -> str:
    """One line: the lines of a wrapped paragraph joined by single spaces."""
    return re.sub(r"\s*\n\s*", " ", text.strip())


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("bugzoo.judge", FOLDER), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    environment.filters["paragraph"] = paragraph
    return environment


def render(name: str, **context: object) -> str:
    """The page ``templates/<name>.md.j2`` filled from ``context`` (a missing name raises)."""
    return _environment().get_template(f"{name}.md.j2").render(**context)
