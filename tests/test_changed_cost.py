"""``bugzoo perf changed``: moved keys are counted and costed from the recorded run times."""

from __future__ import annotations

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.judge.changed_cost import RESULTS, costs, edited_copy


def test_a_moved_run_key_costs_its_recorded_runs_and_a_moved_row_is_counted():
    runs = pd.read_parquet(RESULTS / "traces" / "runs.parquet", columns=["scenario", "wall_s"])
    scenario = runs["scenario"].iloc[0]
    before = {"runs": {scenario: "a", "other": "b"}, "validity": ["x", "y"], "health": ["h"],
              "pairs": ["p"], "tasks": ["t"], "grades": ["g", "g"]}
    after = {**before, "runs": {scenario: "moved", "other": "b"}, "validity": ["x", "z"],
             "grades": ["g", "moved"]}
    got = costs(before, after)
    mine = runs[runs["scenario"] == scenario]
    assert got["scenarios_rerun"] == 1 and got["dev_runs_retrained"] == len(mine)
    assert got["dev_run_s"] == round(mine["wall_s"].sum())
    assert got["validity_rows_rerun"] == 1 and got["grades_rerun"] == 1
    assert got["exported_pairs_rerun"] == got["task_rows_rerun"] == 0


def test_an_edit_whose_text_is_gone_is_refused(tmp_path):
    with pytest.raises(ValueError, match="has no"):
        edited_copy(RESULTS.parent, tmp_path, ("bugzoo/telemetry.py", "no such text", "x"))


def test_a_before_folder_that_is_no_checkout_is_a_usage_error(tmp_path, capsys):
    assert main(["results", "perf", "changed", "--before", str(tmp_path)]) == 2
    assert "is not a bugzoo checkout" in capsys.readouterr().err
