"""README stays true to the code: the catalogue table and the two set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

from bugzoo.catalogue import bugs_table
from bugzoo.tables import markdown

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_catalogue_table_matches_registry():
    block = re.search(r"<!-- catalogue:start -->\n(.*?)\n<!-- catalogue:end -->", README, re.S)
    assert block, "README lost its catalogue markers"
    assert block.group(1).strip() == markdown(bugs_table()).strip(), (
        "README catalogue is stale: regenerate with `bugzoo list bugs --markdown`")


def test_ci_runs_readme_test_command():
    commands = re.findall(r"```bash\n(.*?)\n```", README.split("## Commands")[0], re.S)
    assert len(commands) == 2, "README's quick start must show exactly two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci
