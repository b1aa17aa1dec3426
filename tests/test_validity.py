"""Benchmark validity: the statistics, a quick end-to-end validation, and no regression."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge.validity import (
    ALPHA,
    ENTROPY_MARGIN,
    GENERATION_MARGIN,
    HEALTH_MARGIN,
    POWERED_SEEDS,
    compare,
    read_tables,
    row_key,
    to_power,
    validity_page,
)
from bugzoo.scenarios import default_scenario, list_scenarios

ROOT = Path(__file__).resolve().parents[1]


def test_metric_test_is_an_exact_permutation_test():
    full = compare("final_val_acc", "lower", [0.5, 0.6, 0.55, 0.52, 0.58],
                   [0.9, 0.91, 0.92, 0.89, 0.93])
    assert full.p_value == pytest.approx(1 / 252)  # the exact floor for 5 against 5
    assert full.effect < 0 and full.effect_lo <= full.effect <= full.effect_hi
    overlap = compare("final_val_acc", "lower", [0.9, 0.6, 0.55, 0.92, 0.58],
                      [0.9, 0.91, 0.92, 0.89, 0.93])
    assert overlap.p_value > ALPHA
    # ties do not fall back to a normal approximation below the exact floor
    tied = compare("final_val_acc", "lower", [0.5] * 5, [0.9] * 5)
    assert tied.p_value == pytest.approx(1 / 252)
    # the retest's 10 against 10 is exact too (a sampled test's floor is 1/100001), so its p is
    # the same on every run
    ten = compare("final_val_loss", "higher", [float(x) for x in range(10, 20)],
                  [float(x) for x in range(10)])
    assert ten.p_value == pytest.approx(1 / 184_756)


def test_event_test_and_missing_values():
    events = compare("nonfinite", "event", [True] * 5, [False] * 5)
    assert events.p_value < ALPHA and events.effect == 1.0
    assert compare("nonfinite", "event", [True, False] * 2 + [False], [False] * 5).p_value > ALPHA
    # a run that crashed before any evaluation counts as the worst outcome
    assert compare("final_val_acc", "lower", [None] * 5, [0.9] * 5).p_value < ALPHA


# One scenario per kind of symptom: a metric higher or lower, a validation-holdout gap, an
# event (divergence), runs that disagree, a label leak; all cheap mlp runs.
QUICK = ["mlp-double_softmax", "mlp-frozen_from_start", "mlp-eval_on_train", "mlp-lr_too_high",
         "mlp-nondeterministic_seed", "mlp-leakage_feature_selection", "mlp-missing_zero_grad"]


def test_only_an_underpowered_full_test_is_tested_again_over_more_seeds():
    table = pd.DataFrame({"scenario": ["a", "b", "c"], "valid": [False, False, True],
                          "effect_lo": [0.1, -0.1, 0.2], "effect_hi": [0.3, 0.1, 0.4]})
    assert to_power(table, list(range(5))) == ["a"]  # b's interval holds 0, c is valid
    assert to_power(table, [0, 1]) == []  # a quick look stays quick
    assert to_power(table, POWERED_SEEDS) == []  # already powered


@pytest.mark.slow
def test_quick_validation_end_to_end_agrees_with_the_committed_table(tmp_path):
    """No regression: rerun scenarios through ``bugzoo validate`` on quick settings (5 seeds),
    expect each valid, and expect the committed table to test the same symptom."""
    code = main(["results", "validate", "--scenarios", *QUICK, "--seeds", "0,1,2,3,4", "--runs",
                 str(tmp_path / "runs"), "--out", str(tmp_path), "--no-progress",
                 "harness.steps=80", "harness.eval_interval=40"])
    assert code == 0
    table = pd.read_csv(tmp_path / "validity.csv")
    assert {"scenario", "bug", "model", "valid", "p_value", "q_value", "effect", "effect_lo",
            "effect_hi"} <= set(table.columns)
    assert (table.q_value >= table.p_value).all()  # Benjamini-Hochberg across the scenarios
    assert (table.valid == (table.q_value < ALPHA)).all()
    assert table.set_index("scenario").valid.to_dict() == dict.fromkeys(QUICK, True)
    assert "bugzoo results validate" in (tmp_path / "validity.md").read_text()
    committed = ROOT / "results" / "validity.csv"
    if committed.is_file():
        reference = pd.read_csv(committed).set_index("scenario").loc[QUICK]
        assert reference.valid.all()
        assert (reference.metric == table.set_index("scenario").loc[QUICK].metric).all()


@pytest.mark.skipif(not (ROOT / "results" / "validity.csv").is_file(),
                    reason="results/validity.csv not generated yet")
def test_committed_validity_covers_every_default_scenario():
    """Every scenario of the default sweep was validated and manifests, or is labelled unproven
    and does not: the label is a measured fact, dropped when the bug starts to show."""
    table = pd.read_csv(ROOT / "results" / "validity.csv").set_index("scenario")
    buggy = [s for s in select_scenarios(None, device="cpu") if not s.clean]
    missing = sorted({s.id for s in buggy} - set(table.index))
    assert not missing, f"not validated yet (run bugzoo validate): {missing}"
    invalid = sorted(s.id for s in buggy if not s.unproven and not table.loc[s.id, "valid"])
    assert not invalid, f"invalid scenarios still in the default sweep: {invalid}"
    showing = sorted(s.id for s in buggy if s.unproven and table.loc[s.id, "valid"])
    assert not showing, f"labelled unproven but valid (drop the label): {showing}"
    assert (table.loc[[s.id for s in buggy], "unproven"].fillna("") != "").sum() == sum(
        bool(s.unproven) for s in buggy)
    # a scenario not valid although its effect interval excludes 0 was tested over 10 seeds
    rows = table.loc[[s.id for s in buggy]]
    underpowered = ~rows["valid"] & ((rows["effect_lo"] > 0) | (rows["effect_hi"] < 0))
    assert (rows.loc[underpowered, "seeds"] >= 10).all()


@pytest.mark.skipif(not (ROOT / "results" / "health.csv").is_file(),
                    reason="results/health.csv not generated yet")
def test_committed_health_covers_every_clean_scenario_and_each_variant_is_healthy():
    table = pd.read_csv(ROOT / "results" / "health.csv").set_index("scenario")
    clean = {s.id: s for s in list_scenarios() if s.clean}
    missing = sorted(set(clean) - set(table.index))
    assert not missing, f"not measured yet (run bugzoo validate): {missing}"
    controls = {s.control for s in list_scenarios() if s.control}
    for sid in clean:
        assert table.loc[sid, "role"] == ("control" if sid in controls else "variant"), sid
    variants = table[table["role"] == "variant"]
    assert len(variants) >= 25 and (variants["seeds"] >= 3).all()
    sick = variants[~variants["healthy"].astype(bool)]
    assert sick.empty, f"unhealthy variants: {list(sick.index)}"
    by_accuracy = variants[variants["judged_by"] == "validation accuracy"]
    by_loss = variants[variants["judged_by"] == "validation loss"]
    assert len(by_accuracy) + len(by_loss) == len(variants) and len(by_loss) >= 5
    assert (by_accuracy["min_val_acc"] >= by_accuracy["default_val_acc"] - HEALTH_MARGIN).all()
    assert (by_loss["max_val_loss"] <= by_loss["default_val_loss"] + ENTROPY_MARGIN).all()
    assert set(by_loss.index.str.split("-").str[0]) == {"gpt"}


def test_the_committed_validity_tables_are_todays():
    """Every row of ``validity.csv``, ``health.csv`` and ``language.csv`` has today's key: the
    code, seeds and settings that decided its runs are this checkout's. So the tables prove the
    catalogue as it is, and the tests need not train again what they hold over 5 seeds (each
    healthy variant's accuracy, the language model's margins)."""
    seeds = list(range(5))
    results = ROOT / "results"
    validity = pd.read_csv(results / "validity.csv")
    assert all(row.key == row_key([row.scenario, row.control], seeds, [])
               for row in validity.itertuples())
    health = pd.read_csv(results / "health.csv")
    assert all(row.key == row_key([row.scenario, default_scenario(row.model).id], seeds, [])
               for row in health.itertuples())
    language = pd.read_csv(results / "language.csv")
    assert (language["key"] == row_key([default_scenario("gpt").id], seeds, [])).all()


@pytest.mark.skipif(not (ROOT / "results" / "language.csv").is_file(),
                    reason="results/language.csv not generated yet")
def test_the_language_model_is_held_to_its_margins_over_five_seeds():
    """The causal LM on its defaults ends above its source's entropy by at most the stated
    margin, and writes about as well as it reads, on every seed validity measured; the page
    shows the same rows."""
    table = pd.read_csv(ROOT / "results" / "language.csv")
    assert len(table) >= 5 and table["within"].all()
    assert ((table["excess"] > 0) & (table["excess"] <= ENTROPY_MARGIN)).all()
    assert (table["generation_gap"] <= GENERATION_MARGIN).all()
    page = (ROOT / "results" / "validity.md").read_text()
    section = page.split("## The language model against its source")[1]
    assert f"**{len(table)} of {len(table)} seeds within.**" in section
    for row in table.itertuples():
        assert f"| {row.seed} | {row.final_val_loss:.3f} | {row.entropy_floor:.3f} |" in section


@pytest.mark.slow
def test_validate_changed_reruns_only_the_rows_whose_code_or_settings_changed(tmp_path, capsys):
    """``--changed`` carries a row whose key (its scenarios' release keys, seeds, overrides)
    is today's, without running it, and reruns the rest; tables without keys are refused."""
    pair, out = ["mlp-double_softmax", "mlp-frozen_from_start"], tmp_path / "out"
    quick = ["--seeds", "0,1", "--no-progress", "--out", str(out), "harness.steps=30",
             "harness.eval_interval=15"]
    assert main(["results", "validate", "--scenarios", *pair, "--runs", str(tmp_path / "a"), *quick]) == 0
    first = pd.read_csv(out / "validity.csv").set_index("scenario")
    assert first.key.notna().all() and (first.cpu_kernels != "").all()
    edited = first.copy()  # as if frozen_from_start's code had changed since
    edited.loc["mlp-frozen_from_start", "key"] = "0" * 16
    edited.loc["mlp-double_softmax", "effect"] = 42.0  # a rerun would not keep this
    edited.reset_index().to_csv(out / "validity.csv", index=False)

    runs = tmp_path / "b"
    assert main(["results", "validate", "--changed", "--scenarios", *pair, "--runs", str(runs),
                 *quick]) == 0
    after = pd.read_csv(out / "validity.csv").set_index("scenario")
    assert after.loc["mlp-double_softmax", "effect"] == 42.0
    assert not (runs / "buggy" / "mlp-double_softmax").exists()
    assert (runs / "buggy" / "mlp-frozen_from_start").is_dir()
    assert after.loc["mlp-frozen_from_start", "effect"] == first.loc["mlp-frozen_from_start",
                                                                      "effect"]
    assert after.loc["mlp-frozen_from_start", "key"] == first.loc["mlp-frozen_from_start",
                                                                   "key"]
    assert "carried from the tables written here before" in (out / "validity.md").read_text()

    other_steps = [*quick[:-2], "harness.steps=31", "harness.eval_interval=15"]
    assert main(["results", "validate", "--changed", "--scenarios", "mlp-double_softmax", "--runs",
                 str(runs), *other_steps]) == 0  # new overrides: nothing stands
    assert pd.read_csv(out / "validity.csv").set_index("scenario").loc[
        "mlp-double_softmax", "effect"] != 42.0

    keyless = tmp_path / "keyless"
    keyless.mkdir()
    after.drop(columns="key").reset_index().to_csv(keyless / "validity.csv", index=False)
    capsys.readouterr()
    assert main(["results", "validate", "--changed", "--scenarios", *pair, "--out", str(keyless),
                 "--runs", str(runs), "--no-progress"]) == 2
    assert "has no key column" in capsys.readouterr().err


def test_the_committed_validity_page_is_what_its_tables_make():
    """``results/validity.md`` is written from the three tables beside it, never by hand: a
    row edited in a table, or a page edited alone, fails here. The command and the count of
    carried rows are what the page says (neither is in the tables)."""
    page = (ROOT / "results" / "validity.md").read_text()
    command = re.search(r"Regenerate with `(.*?)`\. Each", page).group(1)
    carried = re.search(r"^(\d+) of these \d+ rows were carried", page, re.M)
    validity, health, language = read_tables(ROOT / "results")
    assert validity_page(validity, health, command, language,
                         int(carried.group(1)) if carried else 0) == page
