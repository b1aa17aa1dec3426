"""README and the guides stay true to the code and to results/: the catalogue tables, the two
set-up commands, and every figure they quote."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from bugzoo.judge.tables import markdown
from bugzoo.teach.catalogue import bugs_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
README = (ROOT / "README.md").read_text()
PAGES = ROOT / "docs" / "pages"
SCORING = (PAGES / "scoring.md").read_text()
SPEED = (PAGES / "speed.md").read_text()


def flat(text: str) -> str:
    """``text`` on one line: figures may wrap."""
    return " ".join(text.split())


def interval(row: pd.Series, key: str) -> str:
    return f"{row[key]:.2f} [{row[f'{key}_lo']:.2f}, {row[f'{key}_hi']:.2f}]"


def board() -> pd.DataFrame:
    return pd.read_csv(RESULTS / "leaderboard.csv").set_index("detector")


def test_catalogue_table_matches_registry():
    page = (PAGES / "catalogue.md").read_text()
    block = re.search(r"<!-- catalogue:start -->\n(.*?)\n<!-- catalogue:end -->", page, re.S)
    assert block, "docs/pages/catalogue.md lost its catalogue markers"
    assert block.group(1).strip() == markdown(bugs_table()).strip(), (
        "the catalogue page is stale: regenerate with `bugzoo list bugs --markdown`")


def test_readme_category_overview_matches_registry():
    """README's short table: every category with its number of bugs, and examples of its own."""
    block = re.search(r"<!-- categories:start -->\n(.*?)\n<!-- categories:end -->", README, re.S)
    assert block, "README lost its category markers"
    table = bugs_table()
    rows = [r.strip("|").split("|") for r in block.group(1).splitlines()[2:]]
    quoted = {c.strip(): (int(n), re.findall(r"`(\w+)`", ex)) for c, n, ex in rows}
    assert list(quoted) == sorted(table["category"].unique())
    for category, (count, examples) in quoted.items():
        mine = set(table.loc[table["category"] == category, "id"])
        assert count == len(mine) and examples and set(examples) <= mine, category
    assert f"{len(table)} bugs in {len(quoted)} categories" in README


def test_ci_runs_readme_test_command():
    commands = re.findall(r"```bash\n(.*?)\n```", README.split("## Commands")[0], re.S)
    assert len(commands) == 2, "README's quick start must show exactly two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_readme_headline_figures_match_committed_results():
    """README's leaderboard, validity and GPU lines are the figures in results/."""
    text = flat(README)
    b = board()
    suite = b.loc["suite: built-ins"]
    runs = int(suite["buggy_runs"] + suite["clean_runs"]) + sum(
        int(pd.read_csv(RESULTS / f"leaderboard_{kind}.csv")["runs"].iloc[0])
        for kind in ("loud", "latent"))
    assert f"({runs} runs on CPU" in text
    assert f"suite of {int((b['role'] == 'heuristic').sum())} heuristics" in text
    assert f"scores **{interval(suite, 'score')}**" in text
    assert (f"catches {int(suite['hits'])} of {int(suite['buggy_runs'])} silent buggy runs and "
            f"false-alarms on {int(suite['false_alarms'])} of {int(suite['clean_runs'])} "
            "clean runs") in text
    baselines = " / ".join(f"{b.loc[d, 'score']:.2f}" for d in
                           ("always_alarm", "never_alarm", "random_alarm"))
    assert f"score {baselines}." in text
    validity = pd.read_csv(RESULTS / "validity.csv")
    assert f"{int(validity['valid'].sum())} manifest, and {int(validity['latent'].notna().sum())}"\
        " are latent" in text
    tools = (RESULTS / "tools.md").read_text()
    anomaly = re.search(r"PyTorch anomaly mode \((\d\.\d\d \[[^]]+\])", text).group(1)
    assert f"| `anomaly` (PyTorch `detect_anomaly`) | seeds 0-2 | {anomaly} |" in tools
    gpu = pd.read_csv(RESULTS / "gpu" / "catalogue.csv")
    same, differs = (gpu["agreement"] == "same").sum(), gpu[gpu["agreement"] == "differs"]
    assert f"{same} of {len(gpu)} buggy scenarios (it differs for {len(differs)}, all latent)" \
        in text and differs["latent"].all()
    cuda = pd.read_csv(RESULTS / "gpu" / "catalogue_leaderboard.csv").set_index("detector")
    cuda = cuda.loc["suite: built-ins"]
    assert (f"scores {interval(cuda, 'score')} at seed 0 with false alarms on "
            f"{int(cuda['false_alarms'])} of {int(cuda['clean_runs'])} clean runs") in text
    mismatch = pd.read_csv(RESULTS / "gpu" / "device_mismatch.csv")
    assert mismatch["valid"].all() and f"on {len(mismatch)} of {len(mismatch)} models" in text


def test_quoted_figures_match_committed_results():
    """The leaderboard and speed figures the guides quote are the ones in results/."""
    b = board()
    suite = b.loc["suite: built-ins"]
    assert f"| `suite: built-ins`, score | {interval(suite, 'score')} |" in SCORING
    assert f"| {interval(suite, 'recall')} ({int(suite['hits'])} hits" in SCORING
    alarms = f"{int(suite['false_alarms'])} of {int(suite['clean_runs'])} runs"
    assert f"| {alarms}, {interval(suite, 'false_alarm_rate')} |" in SCORING
    assert f"**{int(suite['clean_runs'])} clean runs**" in SCORING and suite["clean_runs"] >= 200
    assert f"The {int(suite['false_alarms'])} false alarms are" in SCORING
    baselines = " / ".join(f"{b.loc[d, 'score']:.2f}" for d in
                           ("always_alarm", "never_alarm", "random_alarm"))
    assert f"| {baselines} [{b.loc['random_alarm', 'score_lo']:.2f}, " in SCORING
    overhead = pd.read_csv(RESULTS / "perf" / "overhead.csv")
    ratio = overhead.set_index(["variant", "model"])["median_x"]
    suite_x = " / ".join(f"{ratio['suite: built-ins', m]:.2f}"
                         for m in ("lstm", "transformer", "resnet"))
    assert f"| {suite_x} x (mlp {ratio['suite: built-ins', 'mlp']:.2f} x" in SPEED
    telemetry = " / ".join(f"{ratio['telemetry', m]:.2f}"
                           for m in ("mlp", "lstm", "transformer", "resnet"))
    assert f"| {telemetry} x" in SPEED
    sweep = pd.read_csv(RESULTS / "perf" / "sweep.csv").set_index("workers")
    assert f"| {sweep.loc[2, 'efficiency']:.2f} (1 worker: {sweep.loc[1, 'efficiency']:.2f}" \
        in SPEED


def test_quoted_validity_figures_match_committed_results():
    """The validity section's counts, weakest q-values and measured effects are validity.csv's."""
    text = flat(SCORING)
    validity = pd.read_csv(RESULTS / "validity.csv").set_index("scenario")
    valid = validity[validity["valid"]]
    assert f"**{len(valid)} of {len(valid)} default-sweep scenarios manifest**" in text
    assert f"q-values run across all {len(validity)} scenarios" in text
    weakest = valid.sort_values("q_value").tail(2)
    assert f"`{'` and `'.join(sorted(weakest.index))}` (q = {weakest['q_value'].max():.3f})" \
        in text
    for scenario in ("transformer-mask_after_softmax", "mlp-leakage_feature_selection"):
        row = validity.loc[scenario]
        assert (f"{row['effect']:+.3f} [{row['effect_lo']:+.3f}, {row['effect_hi']:+.3f}]"
                in text), scenario
    assert f"**Latent** ({int(validity['latent'].notna().sum())} scenarios" in text
    ddp = validity.loc["resnet-ddp_unsynced"]
    assert f"+{ddp['effect']:.3f} validation loss, p = {ddp['p_value']:.3f}" in text


def test_quoted_tool_scores_are_in_tools_md():
    """Every score interval the Real tools section quotes is a row of results/tools.md."""
    section = flat(SCORING.split("## Real tools")[1].split("\n## ")[0])
    tools = flat((RESULTS / "tools.md").read_text())
    quoted = re.findall(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", section)
    assert len(quoted) >= 4
    assert [q for q in quoted if q not in tools] == []


def test_quoted_reliability_figures_match_the_tests():
    """The Reliability page's figures are the constants the reliability tests run with."""
    import test_reliability

    page = (PAGES / "reliability.md").read_text()
    kills = test_reliability.KILLS
    assert f"**Injected faults: {test_reliability.FAULT_CASES} cases" in page
    assert f"**Crash and resume: {kills} `kill -9` at seeded random points, {kills} resumes" \
        in page


def test_quoted_category_recalls_match_committed_results():
    """The per-category recall line is the suite's rows of leaderboard_categories.csv."""
    table = pd.read_csv(RESULTS / "leaderboard_categories.csv")
    suite = table[table["detector"] == "suite: built-ins"].sort_values("category")
    quoted = ", ".join(f"{r.category} {r.recall:.2f} ({r.runs})" for r in suite.itertuples())
    assert quoted in flat(SCORING), f"the category line should read: {quoted}"
