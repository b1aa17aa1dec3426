"""The guides build with MkDocs in strict mode, nothing links outside the repository, README stays
a front door, and results/README.md is what bugzoo.judge.results_index writes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bugzoo.cli import main as cli
from bugzoo.judge import results_index

ROOT = Path(__file__).resolve().parents[1]
README_LINES = 300


def test_the_docs_build_in_strict_mode_without_a_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner, not a warning
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           "docs/mkdocs.yml", "-d", str(tmp_path / "site")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    assert (tmp_path / "site" / "results" / "leaderboard" / "index.html").is_file()


def test_nothing_links_outside_the_repository():
    found = subprocess.run(["grep", "-rn", r"\.\./", "README.md", "docs/"], cwd=ROOT,
                           capture_output=True, text=True)
    assert found.returncode == 1, f"paths leaving the repository:\n{found.stdout}"


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "pages").glob("*.md"))]
    for page in pages:  # history belongs in CHANGELOG.md
        text = page.read_text()
        assert not re.search(r"\bround two\b|\bissues? \d|Earlier work", text, re.I), page.name


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs" / "pages").glob("*.md")))
def test_readme_links_every_guide(page):
    assert f"docs/pages/{page}" in (ROOT / "README.md").read_text() or page == "index.md"


def test_results_index_is_up_to_date(tmp_path):
    out = results_index.write(ROOT / "results", tmp_path / "README.md")
    assert out.read_text() == (ROOT / "results" / "README.md").read_text(), (
        "results/README.md is stale: regenerate with bugzoo results index")


def test_results_index_lists_each_file_in_one_row():
    """A page's tables that have a row of their own (the exported pairs beside ``validity.md``,
    the board's figure beside ``leaderboard.md``) are not listed beside the page again."""
    rows = [line.split(" | ")[0] for line in
            (ROOT / "results" / "README.md").read_text().splitlines() if line.startswith("| ")]
    listed = [name for row in rows[1:] for name in re.findall(r"`([^`]+)`", row)]
    assert listed and len(listed) == len(set(listed)), sorted(
        n for n in set(listed) if listed.count(n) > 1)


def test_results_index_names_a_file_no_entry_covers(tmp_path):
    (tmp_path / "leaderboard.md").write_text("# Board\n\nRegenerate with `bugzoo bench`.\n")
    (tmp_path / "leaderboard.csv").write_text("detector\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "ignored.csv").write_text("raw runs are not indexed\n")
    entries = results_index.entries(tmp_path)
    assert [e.files for e in entries if e.linked and e.files[0] == "leaderboard.md"] == [
        ("leaderboard.md", "leaderboard.csv")]
    (tmp_path / "stray.csv").write_text("x\n")
    with pytest.raises(ValueError, match=r"covers \['stray.csv'\]"):
        results_index.entries(tmp_path)
    assert cli(["results", "index", "--results", str(tmp_path)]) == 2


def test_the_detector_guide_tables_every_trace_field_and_runview_field():
    """The trace table is the schema's own, current; the schema names every Observation field;
    the RunFacts and RunView tables name every field of theirs."""
    import dataclasses
    import re

    from bugzoo import Observation, RunView
    from bugzoo.docblocks import block
    from bugzoo.trace import GUIDE_BLOCK, RECORD_FIELDS, RunFacts, fields_table

    guide = (ROOT / "docs" / "pages" / "detectors.md").read_text()
    assert block(guide, GUIDE_BLOCK) == fields_table(), "stale: run `bugzoo results trace-fields`"
    assert list(RECORD_FIELDS) == [f.name for f in dataclasses.fields(Observation)]
    for cls in (RunFacts, RunView):
        rows = re.findall(r"^\| `(\w+)` \|", guide.split(f"| `{cls.__name__}` field")[1]
                          .split("\n\n")[0], re.M)
        assert rows == [f.name for f in dataclasses.fields(cls)], cls.__name__
