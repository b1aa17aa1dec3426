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
from bugzoo.judge import validity
from bugzoo.judge.changed_cost import edited_copy
from bugzoo.judge.prove import PROOFS, RowCode, proof_covered, run_in, uncovered_row_code

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
    # the base's plant made other traces than today's code makes: the stored ones are its
    runs["trace_digest"] = runs["trace_digest"].where(runs["scenario"] != CHANGED, "by the base")
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


def test_runs_that_reproduce_their_stored_traces_are_carried_with_their_validity_rows(
        tmp_path, capsys):
    """No second checkout: today's code makes the stored traces again on this machine. The
    validity row keyed by those runs is carried with them; a scenario whose stored traces
    today's code does not make keeps its key, and so does its row."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "traces", results / "traces")
    for name in ("validity", "health", "language"):
        shutil.copyfile(ROOT / "results" / f"{name}.csv", results / f"{name}.csv")
    runs = pd.read_parquet(results / "traces" / traceset.RUNS_FILE)
    # NEUTRAL's proof seed as this machine makes it (the committed runs may be another's)
    made_here = run_in(ROOT, [(NEUTRAL, 0, True), (NEUTRAL, 0, False)])["digests"]
    for role, digest in zip(("buggy", "control"), made_here, strict=True):
        at = (runs["scenario"] == NEUTRAL) & (runs["seed"] == 0) & (runs["role"] == role)
        runs.loc[at, "trace_digest"] = digest
    old = {NEUTRAL: "made-before-000", CHANGED: "made-before-001"}
    runs["key"] = runs["scenario"].map(old).fillna(runs["key"]).astype(runs["key"].dtype)
    runs["trace_digest"] = runs["trace_digest"].where(runs["scenario"] != CHANGED, "other")
    traceset.rewrite_runs(results / "traces", runs)
    table = pd.read_csv(results / "validity.csv", dtype={"key": str})
    stale = table.assign(key=[validity.row_key([r.scenario, r.control], [0, 1, 2, 3, 4], [],
                                               lambda s: old.get(s, release.scenario_key(s)))
                              for r in table.itertuples()])
    stale.to_csv(results / "validity.csv", index=False)

    assert main(["results", "provenance", "prove", "--traces", str(results / "traces"),
                 "--scenarios", NEUTRAL, CHANGED]) == 0
    out = capsys.readouterr().out
    assert f"{CHANGED}: not proven (its traces differ from the stored ones" in out
    assert "1 of 2 stale scenarios proven neutral and carried, with 1 validity" in out
    carried = pd.read_csv(results / "validity.csv", dtype={"key": str}).set_index("scenario")
    committed = table.set_index("scenario")
    assert carried.loc[NEUTRAL, "key"] == committed.loc[NEUTRAL, "key"]
    assert carried.loc[CHANGED, "key"] == stale.set_index("scenario").loc[CHANGED, "key"]
    others = ~committed.index.isin([NEUTRAL, CHANGED])
    assert carried.loc[others].equals(committed.loc[others])
    proofs = pd.read_csv(results / "traces" / PROOFS)
    assert list(proofs["against"]) == ["its stored traces"]


def test_with_the_code_that_made_them_a_rows_unstored_control_is_proven_too(tmp_path, capsys):
    """A validity row's control has no stored runs in the trace set: with ``--against`` it is
    run under both checkouts, and the row is carried where both agree. The change here is in
    telemetry, which every run reaches and the rows' own code does not."""
    base = edited_copy(ROOT, tmp_path / "a", ("bugzoo/telemetry.py",
                                               "(info.uordblks + info.hblkhd) / 2**20",
                                               "(info.uordblks + info.hblkhd) / (1024 * 1024)"))
    control = "mlp-clean"
    old = scenario_keys(base, [NEUTRAL, control])
    assert old[control] != release.scenario_key(control)
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "traces", results / "traces")
    for name in ("validity", "health", "language"):
        shutil.copyfile(ROOT / "results" / f"{name}.csv", results / f"{name}.csv")
    runs = pd.read_parquet(results / "traces" / traceset.RUNS_FILE)
    runs = runs[runs["scenario"] == NEUTRAL].reset_index(drop=True)
    traceset.rewrite_runs(results / "traces", runs.assign(key=old[NEUTRAL]).astype(
        {"key": runs["key"].dtype}))
    table = pd.read_csv(results / "validity.csv", dtype={"key": str})
    mine = table["scenario"] == NEUTRAL
    assert (table.loc[mine, "control"] == control).all()
    stale = table.copy()
    stale.loc[mine, "key"] = validity.row_key([NEUTRAL, control], [0, 1, 2, 3, 4], [], old.get)
    stale.to_csv(results / "validity.csv", index=False)

    assert main(["results", "provenance", "prove", "--against", str(base), "--traces",
                 str(results / "traces")]) == 0
    assert "2 of 2 stale scenarios proven neutral and carried, with 1 validity" in \
        capsys.readouterr().out
    assert pd.read_csv(results / "validity.csv", dtype={"key": str}).equals(table)
    proofs = pd.read_csv(results / "traces" / PROOFS).set_index("scenario")
    assert proofs.loc[control, "against"] == str(base) and proofs.loc[control, "old_key"] == \
        old[control]


def test_rows_follow_a_proof_only_where_it_ran_the_row_code_that_moved():
    """A validity row is made of runs and of the code that plans and tests them. Where that
    code moved only where a proof runs it (composing and executing a run, a bug's plant), the
    compared traces cover it and the rows can follow their runs; a move anywhere else (the
    decoys a sweep plants, reached through the pool) leaves every row to be remade."""
    here = RowCode.here()
    covered = proof_covered()
    assert uncovered_row_code(here, here, covered) == []
    assert {"bugzoo.config:check_run_config", "bugzoo.bugs.base:patch_method"} <= covered
    for moved, blocks in (("bugzoo.config:check_run_config", False),
                          ("bugzoo.harness.honeypot:DecoyBug", True),
                          ("bugzoo.judge.validity:summarise", True)):
        assert moved in here.units
        edited = RowCode(here.key, {**here.units, moved: "edited"})
        assert uncovered_row_code(here, edited, covered) == ([moved] if blocks else [])


def test_a_checkouts_row_code_is_read_as_the_keys_read_it():
    assert RowCode.at(ROOT) == RowCode.here()
