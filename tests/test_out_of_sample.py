"""The out-of-sample result: bugs that joined after the detectors were tuned are scored apart,
on the same sweep and rules as the board, and the page records the detectors it measured."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import bugzoo.judge.out_of_sample as oos
from bugzoo.bugs import get_bug
from bugzoo.judge.outcomes import with_suites
from bugzoo.judge.scoring import without_honeypots

RESULTS = Path(__file__).resolve().parents[1] / "results"
LATER = {"double_softmax", "missing_zero_grad", "lr_too_high"}


@pytest.fixture
def later_bugs(monkeypatch):
    """Three bugs of the published board as if they had joined after the detectors' release."""
    monkeypatch.setattr(oos, "get_bug", lambda b: replace(get_bug(b), since="9.9")
                        if b in LATER else get_bug(b))
    table = pd.read_parquet(RESULTS / "outcomes.parquet")
    table = table[table["detector"].isin(["loss_plateau", "nonfinite", "always_alarm"])]
    return table[table["bug"].isin(LATER) | table["bug"].isin(["labels_misaligned"])
                 | (table["run_role"] == "clean")]


def test_the_split_is_by_release_and_healthy_runs_count_on_both_sides(later_bugs):
    seen, unseen = oos.by_release(with_suites(later_bugs))
    assert set(unseen["bug"].dropna()) == LATER
    assert set(seen["bug"].dropna()) == {"labels_misaligned"}
    clean = lambda t: set(t.loc[t["run_role"] == "clean", "scenario"])  # noqa: E731
    assert clean(seen) == clean(unseen) and clean(seen)
    assert oos.has_unseen_bugs(later_bugs)


def test_the_page_scores_only_the_unseen_bugs_per_bug(later_bugs, tmp_path):
    oos.write_out_of_sample(later_bugs, tmp_path, "bugzoo score x --publish", "stamp")
    page = (tmp_path / oos.OUT_OF_SAMPLE_FILE).read_text()
    assert (tmp_path / oos.OUT_OF_SAMPLE_FIGURE).read_bytes()[:4] == b"\x89PNG"
    assert f"]({oos.OUT_OF_SAMPLE_FIGURE})" in page
    boards = pd.read_csv(tmp_path / oos.OUT_OF_SAMPLE_TABLE)
    assert set(boards["bug_set"]) == {"tuned-on", "unseen", "joined 9.9"}
    unseen = boards[boards["bug_set"] == "unseen"].set_index("detector")
    one_release = boards[boards["bug_set"] == "joined 9.9"].set_index("detector")
    assert one_release["score"].equals(unseen["score"])  # the only later release: the same
    assert "## The unseen bugs by the release they joined" not in page
    visible = {"lr_too_high"}  # the mistake is a setting: its own section, not the headline
    assert unseen.loc["suite: built-ins", "bugs"] == len(LATER - visible)
    per_bug = page.split("## `suite: built-ins` per unseen bug")[1].split("\n## ")[0]
    assert {m for m in re.findall(r"^\| (\w+) \|", per_bug, re.M)} - {"bug"} == LATER - visible
    assert "## Unseen bugs visible at setup, scored apart" in page
    assert f"`{oos.detectors_digest()}`" in page and "joined in 9.9" in page


def test_the_committed_page_was_measured_with_the_detectors_as_they_are():
    """Out-of-sample means the detectors were not changed for these bugs: the committed page
    names the code digest it was measured with, and it is today's. A change to detectors/
    makes this fail, and the page stays a record of the detectors before it."""
    page = (RESULTS / oos.OUT_OF_SAMPLE_FILE).read_text()
    assert f"detectors' code digest `{oos.detectors_digest()}`" in page


def test_the_unseen_bugs_are_also_scored_by_the_release_they_joined(monkeypatch, tmp_path):
    joined = {"double_softmax": "9.8", "missing_zero_grad": "9.9", "lr_too_high": "9.9"}
    monkeypatch.setattr(oos, "get_bug", lambda b: replace(get_bug(b), since=joined[b])
                        if b in joined else get_bug(b))
    table = pd.read_parquet(RESULTS / "outcomes.parquet")
    table = table[table["detector"].isin(["loss_plateau", "nonfinite", "always_alarm"])
                  & (table["bug"].isin([*joined, "labels_misaligned"])
                     | (table["run_role"] == "clean"))]
    oos.write_out_of_sample(table, tmp_path, "bugzoo score x --publish", "stamp")
    boards = pd.read_csv(tmp_path / oos.OUT_OF_SAMPLE_TABLE).set_index(["bug_set", "detector"])
    assert boards.loc[("joined 9.8", "suite: built-ins"), "bugs"] == 1
    assert boards.loc[("joined 9.9", "suite: built-ins"), "bugs"] == 1  # lr_too_high apart
    section = (tmp_path / oos.OUT_OF_SAMPLE_FILE).read_text().split(
        "## The unseen bugs by the release they joined")[1].split("\n## ")[0]
    assert re.findall(r"^\| (9\.\d) \| suite: built-ins", section, re.M) == ["9.8", "9.9"]


def test_the_tuned_on_bugs_are_also_scored_on_the_model_that_joined_later(later_bugs, tmp_path):
    """A bug the detectors were tuned on, planted in a model that did not exist then, is
    scored apart from its runs on the classifiers, each side with its own healthy variants."""
    seen, _ = oos.by_release(with_suites(later_bugs))
    tuned, later = oos.by_model(seen).values()
    assert set(later["model"]) == {"gpt"} and "gpt" not in set(tuned["model"])
    assert len(tuned) + len(later) == len(seen)
    page = oos.out_of_sample_page(later_bugs, "bugzoo score x --publish", "stamp")
    section = page.split("## The tuned-on bugs on a model the detectors never saw")[1].split(
        "\n## ")[0]
    assert re.findall(r"^\| (the models they were tuned on|models that joined later \(gpt\)) "
                      r"\| suite: built-ins", section, re.M) == [
        "the models they were tuned on", "models that joined later (gpt)"]


def test_a_plugin_bug_is_never_tuned_on_and_a_sweep_of_plugins_alone_has_its_page(
        monkeypatch, tmp_path):
    """A plug-in bug that leaves ``since`` at its default is not counted as a bug the
    detectors were tuned on: a sweep of plug-in bugs alone gets its out-of-sample page."""
    plugins = {"double_softmax", "missing_zero_grad"}
    monkeypatch.setattr(oos, "builtin_ids", lambda: ())  # every bug of this sweep from outside
    table = pd.read_parquet(RESULTS / "outcomes.parquet")
    table = table[table["detector"].isin(["loss_plateau", "nonfinite", "always_alarm"])
                  & (table["bug"].isin(plugins) | (table["run_role"] == "clean"))]
    assert {get_bug(b).since for b in plugins} == {"1.0"}  # what a plug-in's default says
    assert set(oos.releases(table).values()) == {oos.PLUGIN} and oos.has_unseen_bugs(table)
    oos.write_out_of_sample(table, tmp_path, "bugzoo score x --publish", "stamp")
    boards = pd.read_csv(tmp_path / oos.OUT_OF_SAMPLE_TABLE).set_index(["bug_set", "detector"])
    assert boards.loc[("unseen", "suite: built-ins"), "bugs"] == 2
    assert boards.loc[("tuned-on", "suite: built-ins"), "bugs"] == 0
    assert "the bugs from outside the catalogue (plug-ins) were planted afterwards" in (
        tmp_path / oos.OUT_OF_SAMPLE_FILE).read_text()


def test_the_committed_page_is_what_the_published_outcomes_make():
    """``results/out_of_sample.md`` is written from ``results/outcomes.parquet`` (the board's
    runs, decoy pairs left out, as publishing does), never by hand. The command and the
    stamp are what the page says (the sweep folder that holds them is not committed)."""
    page = (RESULTS / oos.OUT_OF_SAMPLE_FILE).read_text()
    command = re.search(r"Regenerate with `(.*?--publish)`\. ", page).group(1)
    stamp = re.search(r"--publish`\. (.*?)\. The built-in detectors were", page).group(1)
    real, _ = without_honeypots(pd.read_parquet(RESULTS / "outcomes.parquet"))
    assert oos.out_of_sample_page(real, command, stamp) == page
