"""``results/tools.md``: the field's tools on bugzoo-bench Lite, remade from ``results/tools/``
alone, with every shipped tool either on it or named with the reason it is not."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bugzoo.detector_registry import detector_class, shipped_detectors
from bugzoo.judge.tools_page import SUITE, TABLES, TOOLS, tools_page

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_the_committed_page_is_what_its_tables_make():
    page = (RESULTS / "tools.md").read_text()
    assert tools_page(RESULTS / TABLES, "bugzoo results tools") == page


def test_every_shipped_tool_has_its_documented_claim_and_a_row_or_a_reason():
    shipped = {n for n in shipped_detectors() if detector_class(n).role == "tool"}
    assert shipped == set(TOOLS)
    board = pd.read_csv(RESULTS / TABLES / "leaderboard.csv").set_index("detector")
    page = (RESULTS / "tools.md").read_text()
    rows, _, missing = page.partition("## Tools that did not run")
    for name in shipped:
        assert f"| `{name}` |" in (rows if name in board.index else missing), name
    assert SUITE in board.index  # the suite on the same runs, beside the tools
