"""README stays true to the code: the catalogue table and the two set-up commands."""

from __future__ import annotations

import re
from pathlib import Path

from bugzoo.judge.tables import markdown
from bugzoo.teach.catalogue import bugs_table

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


def test_quoted_figures_match_committed_results():
    """The leaderboard and speed figures README quotes are the ones in results/."""
    import pandas as pd

    board = pd.read_csv(ROOT / "results" / "leaderboard.csv").set_index("detector")
    suite = board.loc["suite: built-ins"]

    def interval(row, key):
        return f"{row[key]:.2f} [{row[f'{key}_lo']:.2f}, {row[f'{key}_hi']:.2f}]"

    assert f"| `suite: built-ins`, score | {interval(suite, 'score')} |" in README
    assert f"| {interval(suite, 'recall')} ({int(suite['hits'])} hits" in README
    alarms = f"{int(suite['false_alarms'])} of {int(suite['clean_runs'])} runs"
    assert f"| {alarms}, {interval(suite, 'false_alarm_rate')} |" in README
    assert f"**{int(suite['clean_runs'])} clean runs**" in README and suite["clean_runs"] >= 200
    baselines = " / ".join(f"{board.loc[b, 'score']:.2f}" for b in
                           ("always_alarm", "never_alarm", "random_alarm"))
    assert f"| {baselines} [{board.loc['random_alarm', 'score_lo']:.2f}, " in README
    overhead = pd.read_csv(ROOT / "results" / "perf" / "overhead.csv")
    ratio = overhead.set_index(["variant", "model"])["median_x"]
    suite_x = " / ".join(f"{ratio['suite: built-ins', m]:.2f}"
                         for m in ("lstm", "transformer", "resnet"))
    assert f"| {suite_x} x (mlp {ratio['suite: built-ins', 'mlp']:.2f} x" in README
    telemetry = " / ".join(f"{ratio['telemetry', m]:.2f}"
                           for m in ("mlp", "lstm", "transformer", "resnet"))
    assert f"| {telemetry} x" in README
    sweep = pd.read_csv(ROOT / "results" / "perf" / "sweep.csv").set_index("workers")
    assert f"| {sweep.loc[2, 'efficiency']:.2f} (1 worker: {sweep.loc[1, 'efficiency']:.2f}" \
        in README


def test_quoted_reliability_figures_match_the_tests():
    """README's Reliability figures are the constants the reliability tests run with."""
    import test_reliability

    kills = test_reliability.KILLS
    assert f"**Injected faults: {test_reliability.FAULT_CASES} cases" in README
    assert f"**Crash and resume: {kills} `kill -9` at seeded random points, {kills} resumes" \
        in README


def test_quoted_category_recalls_match_committed_results():
    """README's per-category recall line is the suite's rows of leaderboard_categories.csv."""
    import pandas as pd

    table = pd.read_csv(ROOT / "results" / "leaderboard_categories.csv")
    suite = table[table["detector"] == "suite: built-ins"].sort_values("category")
    quoted = ", ".join(f"{r.category} {r.recall:.2f} ({r.runs})" for r in suite.itertuples())
    assert quoted in " ".join(README.split()), f"README's category line should read: {quoted}"
