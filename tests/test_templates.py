"""The results pages' templates: wrapped prose becomes one line a paragraph, and a name the
writer does not give is an error, not an empty gap in a page."""

from __future__ import annotations

import jinja2
import pytest

from bugzoo.judge.templates import paragraph, render


def test_a_wrapped_paragraph_is_one_line():
    assert paragraph("\n  A figure,\n  wrapped   \n over lines.\n") == "A figure, wrapped over lines."


def test_a_page_cannot_be_rendered_with_a_figure_missing():
    with pytest.raises(jinja2.UndefinedError, match="command"):
        render("validity", seeds=5)
