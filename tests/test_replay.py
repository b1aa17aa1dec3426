"""Replay: sealed detectors shown a stored run's trace, confined, raise the alarms they raised
live and score as the live sweep did, from a sweep folder and from a trace set, and nothing
stored changes."""

from __future__ import annotations

import hashlib
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import doc_examples, quick_cfg
from filelock import FileLock

from bugzoo.cli import main
from bugzoo.detector import is_sealed
from bugzoo.detector_registry import detector_class, load_detector, shipped_detectors
from bugzoo.harness import store, traceset
from bugzoo.harness.runner import execute_and_store
from bugzoo.judge.scoring import score_sweep
from bugzoo.judge.sealed import score_runs, sealed_outcomes

ROOT = Path(__file__).resolve().parents[1]
# short real runs of every model: divergence (NaN, exploding and vanishing gradients), and a
# clean run with a loss scale
RUNS = {"mlp-lr_too_high": 30, "lstm-lr_too_high": 30, "transformer-lr_too_high": 15,
        "resnet-lr_too_high": 12, "mlp-clean-fp16_scaler": 20}
# the sealed detectors a plain bench runs (a sealed tool has its own test, tests/test_tools.py)
REPLAYABLE = [n for n in shipped_detectors()
              if is_sealed(detector_class(n)) and detector_class(n).run_by_default]


@pytest.fixture(scope="session")
def sweep(tmp_path_factory, worker_id) -> Path:
    """A sweep folder of ``RUNS`` watched by every replayable built-in, made once per session
    (the first xdist worker makes it, the other waits for it)."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else (
        tmp_path_factory.getbasetemp().parent)
    folder = shared / "replay-sweep"
    with FileLock(str(shared / "replay-sweep.lock")):
        if not (folder / "done").is_file():
            for scenario, steps in RUNS.items():
                for armed in (True, False) if "clean" not in scenario else (True,):
                    execute_and_store(quick_cfg(f"scenario={scenario}", steps=steps), shared,
                                      folder.name, [load_detector(n) for n in REPLAYABLE],
                                      armed=armed)
            (folder / "done").touch()
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_replayed_alarms_equal_the_live_ones(sweep):
    seen = set()
    runs = list(traceset.stored_runs(sweep))
    for run, (replayed, statuses) in zip(runs, score_runs(runs, REPLAYABLE, [sweep]),
                                         strict=True):
        path = store.run_dir(sweep.parent, sweep.name, run.summary["scenario"],
                             run.summary["seed"])
        if run.summary["role"] == "control":
            path = path.with_name(f"{path.name}.{store.CONTROL_TAG}")
        live = store.read_alarms(path)
        pd.testing.assert_frame_equal(replayed, live, check_dtype=False)
        assert not any(s["error"] for s in statuses.values())
        assert {s["scored"] for s in statuses.values()} == {"sealed (namespaces)"}
        seen |= set(live["detector"])
    # the identity is worth something only if several detectors alarmed (thresholds may move)
    assert len(seen - {"always_alarm"}) >= 3 and "nonfinite" in seen


def test_replay_scores_as_the_live_sweep(sweep, tmp_path, capsys):
    live = shutil.copytree(sweep, tmp_path / "live")  # scoring writes its tables beside runs
    score_sweep(live)
    out = tmp_path / "replayed"
    assert main(["bench", "--replay", str(sweep), "--detectors", ",".join(REPLAYABLE),
                 "--out", str(out)]) == 0
    assert "# Detector leaderboard" in capsys.readouterr().out
    for table in ("leaderboard.csv", "leaderboard_categories.csv", "leaderboard_bugs.csv"):
        replayed = pd.read_csv(out / table)
        # the replayed suites are named for what they hold: their replayable members only
        replayed["detector"] = replayed["detector"].str.replace(" (replayable)", "",
                                                                regex=False)
        live_board = pd.read_csv(live / table)
        if "scored" in live_board:  # what differs: where the rows were scored (the setup
            # reader's floor row is made from stored setup digests on both)
            derived = {"derived from stored setup digests"}
            assert set(live_board["scored"].dropna()) - derived == {"in-process (trusted)"}
            assert set(replayed.pop("scored").dropna()) - derived == {"sealed (namespaces)"}
            live_board.pop("scored")
        pd.testing.assert_frame_equal(replayed, live_board)


def test_a_trace_set_replays_as_its_sweep_and_changes_nothing(sweep, tmp_path):
    before = snapshot(sweep)
    traces = tmp_path / "traces"
    assert main(["results", "traces", "export", str(sweep), "--out", str(traces)]) == 0
    assert traceset.is_traceset(traces) and traceset.size_mb(traces) < 1
    assert f"bugzoo results traces export {sweep} --out {traces}" in (traces / "command.txt").read_text()
    made = snapshot(traces)
    from_sweep = sealed_outcomes(traceset.stored_runs(sweep), REPLAYABLE, [])
    pd.testing.assert_frame_equal(sealed_outcomes(traceset.stored_runs(traces), REPLAYABLE, []),
                                  from_sweep, check_dtype=False)
    out = tmp_path / "replayed"
    assert main(["replay", str(traces), "--detectors", "loss_plateau", "--out", str(out)]) == 0
    assert f"bugzoo replay {traces} --detectors loss_plateau" in (out / "leaderboard.md").read_text()
    assert snapshot(sweep) == before and snapshot(traces) == made


def test_documented_replay_example(sweep, tmp_path, monkeypatch):
    """The commands of docs/pages/integrations.md, with its reference sweep played by this
    module's small one."""
    monkeypatch.chdir(tmp_path)
    traceset.export(sweep, traceset.DEFAULT_OUT, "bugzoo traces export (the committed set)")
    [example] = doc_examples("Score a detector in seconds: trace replay", "bash")
    for line in example.strip().splitlines():
        argv = shlex.split(line.split("#")[0].replace("results/runs/dev", str(sweep)))
        assert argv[0] == "bugzoo" and main(argv[1:]) == 0, line
    assert traceset.is_traceset(traceset.DEFAULT_OUT)
    assert "bugzoo results traces export" in (traceset.DEFAULT_OUT / "command.txt").read_text()
    board = pd.read_csv("results/runs/replayed/leaderboard.csv")
    assert set(REPLAYABLE) <= set(board["detector"])


def _without_layer_norms(sweep: Path, tmp_path: Path) -> Path:
    old = shutil.copytree(sweep, tmp_path / "old")
    next(old.glob(f"*/seed0/{store.LAYERS_FILE}")).unlink()  # as runs stored before them
    return old


@pytest.mark.parametrize(("argv", "fragment"), [
    (["bench", "--replay", "{old}"], "lack trace.parquet or layer_grad_norms.parquet"),
    (["bench", "--replay", "{empty}"], "holds no stored runs"),
    (["bench", "--replay", "{sweep}", "--detectors", "stale_grads"],
     "detector stale_grads cannot be replayed: it is not sealed (reads the gradients"),
    (["bench", "--replay", "{sweep}", "--quick"], "takes --detectors and --out only"),
    (["bench", "--replay", "{sweep}", "--out", "{sweep}/tables"], "replay never changes it"),
    (["results", "traces", "export", "{empty}"], "holds no stored runs"),
    (["results", "traces", "export", "{sweep}", "--out", "{old}"], "is not a trace set"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(argv, fragment, sweep, tmp_path,
                                                          capsys):
    folders = {"sweep": sweep, "old": _without_layer_norms(sweep, tmp_path),
               "empty": tmp_path / "empty"}
    folders["empty"].mkdir()
    before = {name: snapshot(f) for name, f in folders.items()}
    assert main([a.format(**folders) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err and "Traceback" not in err
    assert {name: snapshot(f) for name, f in folders.items()} == before


REFERENCE = ROOT / "results" / "traces"


@pytest.mark.skipif(not traceset.is_traceset(REFERENCE),
                    reason="no reference trace set: `bugzoo traces export results/runs/dev`")
def test_the_committed_reference_trace_set_is_compact_and_replays():
    # compact per stored value, whatever the catalogue's runs, steps and parameter tensors (the
    # gpt keeps a gradient norm for each of its 28, the mlp for 6): a value is a trace cell or
    # a layer's gradient norm at a step, a float32 of 4 bytes before compression
    trace = pd.read_parquet(REFERENCE / "trace.parquet")
    values = len(pd.read_parquet(REFERENCE / "layer_grad_norms.parquet")) + trace.drop(
        columns=["run", "step"]).size
    assert traceset.size_mb(REFERENCE) * 2**20 / values < 2.5, "over 2.5 bytes a stored value"
    assert "bugzoo traces export results/runs/dev" in (REFERENCE / "command.txt").read_text()
    run = next(traceset.stored_runs(REFERENCE))
    [(alarms, statuses)] = score_runs([run], ["always_alarm"], [])
    assert len(run.observations()) == run.summary["steps"] or run.summary["outcome"] != "completed"
    assert list(alarms["step"]) == [0] and statuses["always_alarm"]["error"] is None
    # a step is an int, as live (a detector may index with it: trace_memoriser does)
    assert all(type(o.step) is int for o in run.observations())


def test_a_sweep_of_the_changed_scenarios_completes_a_trace_set(sweep, tmp_path):
    """``traces export --keep-unchanged`` keeps the set's runs whose scenario the new sweep
    lacks and whose code is unchanged, restamped with today's release; a run whose code
    changed is dropped, and the new sweep's runs replace their scenario's."""
    from bugzoo import release

    traces = tmp_path / "traces"
    assert main(["results", "traces", "export", str(sweep), "--out", str(traces)]) == 0
    full = pd.read_parquet(traces / traceset.RUNS_FILE)
    assert full["key"].notna().all()
    edited = full.assign(key=full["key"].where(full["scenario"] != "lstm-lr_too_high",
                                                "0" * 16), release="older")
    edited.to_parquet(traces / traceset.RUNS_FILE, index=False)  # as if lstm's code changed
    changed = tmp_path / "changed"
    shutil.copytree(sweep / "mlp-lr_too_high", changed / "mlp-lr_too_high")
    assert main(["results", "traces", "export", str(changed), "--out", str(traces),
                 "--keep-unchanged"]) == 0

    runs = pd.read_parquet(traces / traceset.RUNS_FILE)
    assert set(runs["scenario"]) == set(RUNS) - {"lstm-lr_too_high"}
    kept = runs["scenario"] != "mlp-lr_too_high"
    assert (runs.loc[kept, "release"] == "older").all()  # a carried run keeps who made it
    assert (runs.loc[~kept, "release"] == release.digest()).all()
    expected = sealed_outcomes(traceset.stored_runs(sweep), REPLAYABLE, [])
    expected = expected[expected["scenario"] != "lstm-lr_too_high"].reset_index(drop=True)
    got = sealed_outcomes(traceset.stored_runs(traces), REPLAYABLE, [])
    columns = [c for c in expected.columns if c != "release"]
    pd.testing.assert_frame_equal(got[columns], expected[columns], check_dtype=False)


def test_a_trace_set_holds_events_and_measures_as_one_symptom_column(sweep, tmp_path):
    """An event's symptom is a bool in a run's summary and a metric's a number: one set holds
    both, as numbers, whichever comes first in it (a set whose first run was an event's
    could not be written)."""
    import json

    mixed = tmp_path / "mixed"
    for scenario in ("mlp-lr_too_high", "resnet-lr_too_high"):
        shutil.copytree(sweep / scenario, mixed / scenario)
    for summary in (mixed / "resnet-lr_too_high").rglob("summary.json"):  # as a metric's
        summary.write_text(json.dumps({**json.loads(summary.read_text()),
                                       "symptom_value": 2.5}))
    traces = tmp_path / "traces"
    assert main(["results", "traces", "export", str(mixed), "--out", str(traces)]) == 0
    runs = pd.read_parquet(traces / traceset.RUNS_FILE).set_index("scenario")["symptom_value"]
    assert runs.dtype.kind == "f" or str(runs.dtype) == "Float64", runs.dtype
    assert set(runs.loc["mlp-lr_too_high"]) <= {0.0, 1.0}
    assert set(runs.loc["resnet-lr_too_high"]) == {2.5}
