"""README and the guides stay true to the code and to results/: the catalogue tables, the two
set-up commands, and every figure they quote."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from bugzoo.judge import quotes
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


def test_the_boards_overhead_is_the_run_weighted_paid_overhead():
    """The suite's overhead column is overhead.csv's per-model ``paid_x``, weighted by the
    model's share of the scored runs (the published outcomes: one row per run and detector)."""
    runs = pd.read_parquet(RESULTS / "outcomes.parquet")
    silent = runs[~runs["loud"] & ~runs["unproven"] & (runs["detector"] == "nonfinite")]
    weights = silent.groupby("model").size()
    paid = pd.read_csv(RESULTS / "overhead.csv").set_index(["variant", "model"])["paid_x"]
    expected = sum(paid["suite: built-ins", m] * n for m, n in weights.items()) / weights.sum()
    assert board().loc["suite: built-ins", "overhead"] == pytest.approx(expected, abs=0.005)


def test_the_tool_scores_typed_in_the_real_tools_section_are_0_1s():
    """The Real tools section quotes today's tools board through figures (kept current by
    ``tests/test_quotes.py``); the intervals typed outside a figure are the 0.1 scoring's, and
    each is a row of ``results/history/tools-0.1.md``."""
    section = flat(SCORING.split("## Real tools")[1].split("\n## ")[0])
    typed = re.sub(r"<!--fig:.*?<!--/fig-->", "", section)
    old = flat((RESULTS / "history" / "tools-0.1.md").read_text())
    quoted = re.findall(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", typed)
    assert len(quoted) >= 4
    assert [q for q in quoted if q not in old] == []
    assert "<!--fig:tools_board(" in section


def test_quoted_reliability_figures_match_the_tests():
    """The Reliability page's figures are the constants the reliability tests run with."""
    import test_reliability

    page = (PAGES / "reliability.md").read_text()
    kills = test_reliability.KILLS
    assert f"**Injected faults: {test_reliability.FAULT_CASES} cases" in page
    assert f"**Crash and resume: {kills} `kill -9` at seeded random points, {kills} resumes" \
        in page


def test_the_misses_section_names_every_missed_scenario_and_every_first_member():
    """The misses section quotes its counts as figures (``tests/test_quotes.py`` keeps them
    current); here, that it names every scenario whose buggy runs the suite misses, and every
    member that alarmed first on a twin or a healthy run, each with its figure."""
    r = quotes.Results(RESULTS)
    section = flat(SCORING.split("## What the suite misses")[1].split("\n## ")[0])
    for kind in ("", "visible"):
        buggy = r.suite(kind)
        missed = buggy[(buggy["run_role"] == "buggy") & (buggy["outcome"] == "miss")]
        for scenario in missed["scenario"].unique():
            named = f"`{scenario}` (<!--fig:misses({scenario})-->" if not kind else f"`{scenario}`"
            assert named in section, scenario
    for role in ("control", "clean"):
        for member in quotes.first_alarms(r, role)["detector"].unique():
            assert f"`{member}` (<!--fig:false_alarms({role}, {member})-->" in section, member


def test_a_detector_that_breaks_on_the_causal_lm_is_named_as_measured():
    """README and the scoring page say that ``overfit_probe`` fails at setup on every causal-LM
    run exactly while the published outcomes show it."""
    outcomes = pd.read_parquet(RESULTS / "outcomes.parquet")
    probe = outcomes[(outcomes["detector"] == "overfit_probe") & (outcomes["model"] == "gpt")]
    failed_on_every_run = bool(len(probe)) and bool(
        probe["detector_error"].fillna("").str.startswith("setup:").all())
    assert ("`overfit_probe` fails at setup on every causal-LM run" in flat(README)) \
        == failed_on_every_run
    assert ("fails at setup on every causal-LM run" in flat(SCORING)) == failed_on_every_run


def test_the_rows_that_detect_nothing_score_about_0():
    """What README says of the baselines and integrity rows, whatever their quoted figures:
    each scores 0 within its interval, and reading the setup scores exactly 0 on the headline."""
    b = board()
    for row in ("always_alarm", "never_alarm", "random_alarm", "trace_memoriser"):
        assert b.loc[row, "score_lo"] <= 0 <= b.loc[row, "score_hi"], row
    assert (b.loc["settings_reader", ["score", "score_lo", "score_hi"]] == 0).all()
    assert (quotes.settings_mirror(pd.read_parquet(RESULTS / "outcomes.parquet"), "")["score"]
            == 0)


def test_the_settings_mirror_wins_only_where_the_board_sets_it_apart():
    """On the bugs visible at setup the mirror of ``settings_reader`` scores while detecting
    nothing (the reason for their board of their own), and the healthy column flags it."""
    mirror = quotes.settings_mirror(pd.read_parquet(RESULTS / "outcomes.parquet"), "visible")
    assert mirror["score_lo"] > 0 and mirror["flag"]


def test_the_published_sweeps_made_what_their_boards_score():
    """The reference sweep's recorded runs are the published trace set's (one release), and
    Lite's recorded runs are the runs a plain bench plans today."""
    sweep = pd.read_csv(RESULTS / "sweep_time.csv")
    traces = pd.read_parquet(RESULTS / "traces" / "runs.parquet")
    if set(pd.read_parquet(RESULTS / "outcomes.parquet")["release"]) == set(traces["release"]):
        assert sweep["runs_made"].sum() == len(traces)
    lite = pd.read_csv(RESULTS / "lite" / "sweep_time.csv")
    assert f"{lite['runs_made'].sum():,}" == quotes.planned_runs(quotes.Results(RESULTS), "lite")
    board = pd.read_csv(RESULTS / "lite" / "leaderboard.csv").set_index("detector")
    assert board.loc["loss_plateau", "scored"] == "sealed (namespaces)"


def test_the_gpu_figures_mean_what_the_pages_say_of_them():
    """The scenarios whose symptom differs on CUDA are all unproven, and ``device_mismatch``
    is valid on every model it ran on."""
    gpu = pd.read_csv(RESULTS / "gpu" / "catalogue.csv")
    assert gpu.loc[gpu["agreement"] == "differs", "latent"].all()  # the column's old name
    assert pd.read_csv(RESULTS / "gpu" / "device_mismatch.csv")["valid"].all()


def test_what_the_speed_page_says_in_words_is_what_it_measured():
    """The words around Speed's figures: `never_alarm` reads below telemetry alone on the
    lstm, and data generation takes no time inside a run."""
    ratio = pd.read_csv(RESULTS / "perf" / "overhead.csv").set_index(["variant", "model"])
    assert "as `never_alarm` does on the lstm" in " ".join(SPEED.split())
    assert ratio.loc[("never_alarm", "lstm"), "median_x"] < ratio.loc[("telemetry", "lstm"),
                                                                      "median_x"]
    phases = pd.read_csv(RESULTS / "perf" / "profile.csv").set_index("phase")["share"]
    generation = next(p for p in phases.index if p.startswith("data generation"))
    assert "and data generation nothing" in flat(SPEED) and f"{phases[generation]:.0%}" == "0%"
