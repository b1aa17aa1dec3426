"""The figures README and the guides quote are written from results/ (``bugzoo results pages``), so a
sentence can be reworded freely, a stale figure fails here, and no interval is typed by hand."""

from __future__ import annotations

import re

import pytest

from bugzoo.errors import UsageError
from bugzoo.judge import quotes
from bugzoo.judge.quotes import FIGURE, PAGES, ROOT, Results, filled, stale

RESULTS = Results(ROOT / "results")
INTERVAL = re.compile(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]")
# quotes a page of the 0.1 scoring that no command makes today; test_readme holds it to the page
HISTORICAL = {"docs/pages/scoring.md": ("## Real tools", "\n## ")}


@pytest.mark.parametrize("page", PAGES)
def test_every_quoted_figure_and_generated_block_is_current(page):
    found = stale((ROOT / page).read_text(), RESULTS)
    assert found == [], f"stale figures in {page} (run `bugzoo results pages`): {found}"


def test_a_stale_figure_is_found_and_rewritten():
    text = "The suite of <!--fig:heuristics()-->999<!--/fig--> heuristics."
    assert stale(text, RESULTS) == [
        f"heuristics(): '999', results say '{quotes.heuristics(RESULTS)}'"]
    assert stale(filled(text, RESULTS), RESULTS) == []
    assert filled(text, RESULTS).startswith("The suite of <!--fig:heuristics()-->")


def test_rewording_the_sentence_around_a_figure_fails_nothing():
    readme = (ROOT / "README.md").read_text()
    reworded = FIGURE.sub(lambda m: f"said to be {m[0]} by the board", readme)
    assert reworded != readme and stale(reworded, RESULTS) == []


def test_an_unknown_figure_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError, match="unknown quoted figure 'heuristic'.*heuristics"):
        stale("<!--fig:heuristic()-->23<!--/fig-->", RESULTS)
    with pytest.raises(UsageError, match=r"quoted figure board\(nobody, score\)"):
        stale("<!--fig:board(nobody, score)-->0<!--/fig-->", RESULTS)


def test_no_interval_is_typed_by_hand():
    """Every ``0.12 [0.03, 0.20]`` in README and the guides is a quoted figure or inside a
    generated block."""
    typed = {}
    for page in PAGES:
        text = FIGURE.sub("", (ROOT / page).read_text())
        text = re.sub(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", "", text, flags=re.S)
        if page in HISTORICAL:
            start, end = HISTORICAL[page]
            head, _, rest = text.partition(start)
            text = head + rest.partition(end)[2]
        if found := INTERVAL.findall(text):
            typed[page] = found
    assert typed == {}


def test_pages_check_exits_1_on_a_stale_page_and_pages_rewrites_it(tmp_path, monkeypatch, capsys):
    page = tmp_path / "README.md"
    page.write_text("<!--fig:validity(unproven)-->-1<!--/fig--> unproven\n")
    monkeypatch.setattr(quotes, "ROOT", tmp_path)
    monkeypatch.setattr(quotes, "PAGES", ("README.md",))
    results = ["--results", str(ROOT / "results")]
    assert quotes.main(["--check", *results]) == 1
    assert "validity(unproven): '-1'" in capsys.readouterr().err
    assert quotes.main(results) == 0 and quotes.main(["--check", *results]) == 0
    assert page.read_text() == (f"<!--fig:validity(unproven)-->{quotes.validity(RESULTS, 'unproven')}"
                                "<!--/fig--> unproven\n")
