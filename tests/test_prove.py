"""``bugzoo provenance prove``: stored runs cross a change that leaves their traces as they were,
and only such a change."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from bugzoo import release
from bugzoo.cli import main
from bugzoo.harness import traceset
from bugzoo.judge.changed_cost import edited_copy
from bugzoo.judge.prove import PROOFS

ROOT = Path(__file__).resolve().parents[1]
NEUTRAL, CHANGED = "mlp-missing_zero_grad", "mlp-lr_too_high"


def scenario_keys(checkout: Path, scenarios: list[str]) -> dict[str, str]:
    code = ("import json, sys; from bugzoo import release; "
            "print(json.dumps({s: release.scenario_key(s) for s in sys.argv[1:]}))")
    done = subprocess.run([sys.executable, "-c", code, *scenarios], cwd=checkout,
                          env={"PYTHONPATH": str(checkout), "PATH": ""}, capture_output=True,
                          text=True, check=True)
    return __import__("json").loads(done.stdout)


def test_a_neutral_change_carries_its_runs_with_a_proof_and_a_real_one_does_not(tmp_path,
                                                                                 capsys):
    # the code that "made" the stored runs: summarize written another way (the same numbers,
    # and summaries are not traces) and lr_too_high's plant changed
    base = edited_copy(ROOT, tmp_path / "a", ("bugzoo/harness/record.py",
                                               '"steps_completed": int(len(trace)),',
                                               '"steps_completed": int(len(trace)) + 0,'))
    plant = base / "bugzoo" / "bugs" / "lr_too_high.py"
    plant.write_text(plant.read_text().replace("float(trainer.cfg.bug.params.lr)",
                                               "2 * float(trainer.cfg.bug.params.lr)"))
    old = scenario_keys(base, [NEUTRAL, CHANGED])
    assert old[NEUTRAL] != release.scenario_key(NEUTRAL)  # every run's key moved
    traces = tmp_path / "traces"
    shutil.copytree(ROOT / "results" / "traces", traces)
    runs = pd.read_parquet(traces / traceset.RUNS_FILE)
    runs = runs[runs["scenario"].isin(old)].reset_index(drop=True)
    runs["key"] = runs["scenario"].map(old).astype(runs["key"].dtype)
    traceset.rewrite_runs(traces, runs)

    assert main(["results", "provenance", "prove", "--against", str(base), "--traces", str(traces),
                 "--scenarios", NEUTRAL, CHANGED]) == 0
    out = capsys.readouterr().out
    assert f"{CHANGED}: not proven (its traces differ)" in out
    assert "1 of 2 stale scenarios proven neutral" in out
    after = pd.read_parquet(traces / traceset.RUNS_FILE)
    assert (after.loc[after["scenario"] == NEUTRAL, "key"] == release.scenario_key(NEUTRAL)).all()
    assert (after.loc[after["scenario"] == CHANGED, "key"] == old[CHANGED]).all()
    assert after.drop(columns="key").equals(runs.drop(columns="key"))
    proofs = pd.read_csv(traces / PROOFS)
    assert list(proofs["scenario"]) == [NEUTRAL] and proofs["old_key"][0] == old[NEUTRAL]
    assert len(proofs["trace_digests"][0].split()) == 2  # the buggy run and its twin


def test_against_a_folder_that_is_no_checkout_is_a_usage_error(tmp_path, capsys):
    assert main(["results", "provenance", "prove", "--against", str(tmp_path), "--traces",
                 str(ROOT / "results" / "traces")]) == 2
    assert "is not a bugzoo checkout" in capsys.readouterr().err
