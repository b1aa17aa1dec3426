"""The sweep harness: scenario selection, resumability after kill -9, isolation, budgets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import faults
import pandas as pd
import pytest

from bugzoo.cli import main as cli_main
from bugzoo.commands import command_line
from bugzoo.config import compose_run
from bugzoo.detector import Detector
from bugzoo.detector_registry import load_detector
from bugzoo.errors import UsageError
from bugzoo.harness import store, sweep
from bugzoo.harness.pool import RunTask, run_tasks
from bugzoo.harness.runner import execute
from bugzoo.judge.scoring import outcomes
from bugzoo.scenarios import get_scenario

SCENARIOS = ["mlp-clean", "mlp-double_softmax", "mlp-missing_zero_grad"]


@pytest.fixture
def fake_scenarios(tmp_path, monkeypatch):
    """A private scenarios folder with fake bugs: a silent one, an excluded one, a CUDA-only
    one and a loud one, beside the mlp control."""
    from bugzoo import bugs
    from bugzoo import scenarios as registry

    folder = tmp_path / "scenarios"
    folder.mkdir()
    for sid, bug, extra in [("mlp-clean", None, ""), ("mlp-a", "a", ""),
                            ("mlp-b", "b", "excluded: flaky on CPU\n"), ("mlp-gpu", "gpu", ""),
                            ("mlp-boom", "boom", "")]:
        defaults = "  - override /model: mlp\n" + (f"  - override /bug: {bug}\n" if bug else "")
        (folder / f"{sid}.yaml").write_text(f"scenario: {sid}\ndefaults:\n{defaults}{extra}")
    fake = {"a": bugs.Bug("a", "a", "loss", "", bugs.SymptomCheck("final_loss", "higher"), "", "", ""),
            "b": bugs.Bug("b", "b", "loss", "", bugs.SymptomCheck("final_loss", "higher"), "", "", ""),
            "gpu": bugs.Bug("gpu", "g", "precision", "", bugs.SymptomCheck("final_loss", "higher"), "",
                            "", "", requires=("cuda",)),
            "boom": bugs.Bug("boom", "b", "loop", "", bugs.SymptomCheck("crashed", "event"), "",
                             "", "", loud=True)}
    monkeypatch.setattr(registry, "SCENARIO_DIR", folder)
    for module in (bugs, registry):
        monkeypatch.setattr(module, "get_bug", fake.__getitem__)
    monkeypatch.setattr(registry, "bug_ids", lambda: list(fake))
    registry.registry.cache_clear()
    yield folder
    registry.registry.cache_clear()


def test_select_scenarios_skips_excluded_and_cuda_and_isolates_loud(fake_scenarios,
                                                                    monkeypatch):
    def ids(scenarios):
        return [s.id for s in scenarios]

    chosen = sweep.select_scenarios(None, device="cpu")
    assert ids(chosen) == ["mlp-a", "mlp-boom", "mlp-clean"]
    assert {s.id: s.isolate for s in chosen} == {"mlp-a": False, "mlp-boom": True,
                                                  "mlp-clean": False}
    assert {s.id: s.control for s in chosen} == {"mlp-a": "mlp-clean", "mlp-boom": "mlp-clean",
                                                  "mlp-clean": None}
    assert "mlp-gpu" in ids(sweep.select_scenarios(None, device="cuda"))
    # a buggy scenario brings its control along
    assert ids(sweep.select_scenarios(["*-a"], device="cpu")) == ["mlp-a", "mlp-clean"]
    assert ids(sweep.select_scenarios(["mlp-clean"], device="cpu")) == ["mlp-clean"]
    monkeypatch.setattr(sweep, "QUICK_SCENARIOS", ("mlp-boom", "mlp-b"))
    assert ids(sweep.select_scenarios(None, quick=True, device="cpu")) == ["mlp-boom",
                                                                           "mlp-clean"]
    with pytest.raises(UsageError, match="no scenario matches 'zzz\\*'"):
        sweep.select_scenarios(["zzz*"], device="cpu")
    with pytest.raises(UsageError, match="did you mean 'mlp-a'"):
        sweep.select_scenarios(["mlp-aa"], device="cpu")


def _complete(out):
    return sorted(p.parent for p in out.glob("*/seed*/summary.json"))


def _bench(out, *extra):
    return [sys.executable, "-m", "bugzoo.cli", "bench", "--scenarios", *SCENARIOS,
            "--seeds", "0,1", "--workers", "1", "--out", str(out), "--no-progress",
            "--detectors", "grad_explosion", "loss_plateau", "nonfinite",
            "harness.steps=20", "harness.eval_interval=10", *extra]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _forked(pid: int) -> list[int]:
    """The fork server below ``pid`` and the workers it forked (they share its command line)."""
    return [p for p, cmd in faults.descendants(pid) if "multiprocessing.forkserver" in cmd]


@pytest.mark.slow
def test_workers_exit_when_the_sweep_alone_is_killed(tmp_path):
    """kill -9 of the bench process only (as the OOM killer does): its workers must not go on."""
    out = tmp_path / "sweep"
    proc = subprocess.Popen(_bench(out, "harness.steps=1000000", "harness.timeout_s=600"),
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_forked(proc.pid)) < 2:
        time.sleep(0.1)
    time.sleep(1)  # the worker is training, far from the end of its run
    assert len(_forked(proc.pid)) >= 2, "no fork server and worker below the bench"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _group_alive(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not alive, "a worker outlived the killed sweep"


def watched_task(root, scenario: str, steps: int, isolate: bool, timeout_s: float) -> RunTask:
    """A seed-0 run of ``scenario`` for ``steps`` steps, watched by ``nonfinite``."""
    return RunTask(get_scenario(scenario), 0, (f"harness.steps={steps}", "harness.eval_interval=10"),
                   ("nonfinite",), str(root), isolate=isolate, timeout_s=timeout_s)


def test_hung_pool_worker_becomes_a_recorded_hang(tmp_path):
    hang = watched_task(tmp_path, "mlp-clean", 1_000_000, isolate=False, timeout_s=3)
    fine = watched_task(tmp_path, "mlp-double_softmax", 20, isolate=False, timeout_s=120)
    # one reusable worker takes both: the hang must cost only its own run
    records = {r["scenario"]: r["outcome"] for r in run_tasks([fine, hang], workers=1)}
    assert records == {"mlp-clean": "hang", "mlp-double_softmax": "completed"}
    summary = store.read_summary(hang.path)
    assert summary["hung"] and summary["outcome"] == "hang" and "3 s" in summary["error"]
    assert "nonfinite" in summary["detectors"]


@pytest.mark.slow
def test_isolated_runs_share_the_slots_with_pooled_runs(tmp_path):
    long = watched_task(tmp_path, "mlp-clean", 1_000_000, isolate=False, timeout_s=15)
    risky = watched_task(tmp_path, "mlp-inplace_op_autograd", 20, isolate=True, timeout_s=120)
    # two slots: the risky run starts next to the long one, not after it
    order = [(r["scenario"], r["outcome"]) for r in run_tasks([long, risky], workers=2)]
    assert order == [("mlp-inplace_op_autograd", "crashed"), ("mlp-clean", "hang")]


class Sleeper(Detector):
    name = "sleeper"

    def observe(self, obs):
        if obs.step == 2:
            time.sleep(120)  # the budget's alarm interrupts it after 0.5 s
        return []


def test_slow_detector_is_cut_off_and_run_survives():
    cfg = compose_run(["scenario=mlp-clean", "harness.steps=20", "harness.eval_interval=10",
                       "harness.detector_budget_s=0.5", "optim.lr=30", "optim.schedule=constant"])
    t0 = time.perf_counter()
    result = execute(cfg, [Sleeper(), load_detector("loss_plateau")])
    # a run that waited for the sleep would take 120 s; a loaded machine can slow the 20 steps
    assert time.perf_counter() - t0 < 60
    status = result.summary["detectors"]
    assert result.summary["outcome"] == "completed"
    assert "DetectorTimeout" in status["sleeper"]["error"]
    assert status["loss_plateau"]["error"] is None and status["loss_plateau"]["alarms"] == 1


@pytest.mark.slow
def test_exclusive_detector_gets_a_run_of_its_own(tmp_path):
    # anomaly mode turns lr_too_high's NaN into a crash; sharing its run would blind nonfinite,
    # which is scored sealed on the trace of the run no detector instruments
    out = tmp_path / "sweep"
    assert cli_main(["bench", "--scenarios", "mlp-lr_too_high", "--seeds", "0", "--workers", "1",
                     "--out", str(out), "--no-progress", "--no-overhead", "--detectors",
                     "nonfinite", "anomaly", "harness.steps=30", "harness.eval_interval=10"]) == 0
    shared, own = out / "mlp-lr_too_high" / "seed0", out / "mlp-lr_too_high" / "seed0.anomaly"
    assert set(store.read_summary(shared)["detectors"]) == set()  # nonfinite is scored sealed
    assert set(store.read_summary(own)["detectors"]) == {"anomaly"}
    assert store.read_summary(shared)["outcome"] == "completed"
    assert store.read_summary(own)["outcome"] == "crashed"
    assert store.read_summary(out / "mlp-lr_too_high" / "seed0.anomaly.control")["role"] == \
        "control"  # the exclusive run has its own disarmed twin, as the shared run does
    table = outcomes(out)
    table = table[(table["run_role"] == "buggy")
                  & (table["scenario"] == "mlp-lr_too_high")].set_index("detector")
    assert table.loc["nonfinite", "outcome"] == "hit" and table.loc["anomaly", "outcome"] == "hit"


def test_recorded_command_drops_how_it_ran():
    argv = ["--scenarios", "mlp-*", "--workers", "4", "--no-progress", "--workers=2", "seed=1"]
    assert command_line("bench", argv) == "bugzoo bench --scenarios 'mlp-*' seed=1"


def test_sweep_made_by_several_commands_names_each_once(tmp_path):
    for command in ["bugzoo bench", "bugzoo bench --detectors anomaly", "bugzoo bench"]:
        store.write_sweep_command(tmp_path, command)
    expected = "bugzoo bench` then `bugzoo bench --detectors anomaly"
    assert store.read_sweep_command(tmp_path) == expected
    assert store.read_sweep_command(tmp_path / "none") is None


def test_a_stopped_bench_records_its_time_and_the_command_that_resumes_it_adds_its_own(
        tmp_path, monkeypatch, capsys):
    """A bench stopped by SIGTERM (as a batch system or a closing session stops it) records
    its wall time and the runs it made before it exits; the command that finishes the sweep
    adds its own row, so sweep_time.csv accounts for every run."""
    from bugzoo.judge import bench

    out = tmp_path / "sweep"
    argv = ["bench", "--scenarios", "mlp-double_softmax", "--seeds", "0", "--workers", "1",
            "--out", str(out), "--no-progress", "--no-overhead", "--detectors", "nonfinite",
            "harness.steps=20", "harness.eval_interval=10"]
    real = bench.sweep

    def stopped_after_one_run(tasks, workers, progress):
        real(tasks[:1], workers, progress=progress)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal arrives first

    monkeypatch.setattr(bench, "sweep", stopped_after_one_run)
    assert cli_main(argv) == 130
    assert "runs made: 1 (recorded in" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is not bench._interrupt  # put back
    monkeypatch.undo()
    assert cli_main(argv) == 0
    rows = pd.read_csv(out / "sweep_time.csv")
    # the second command makes the bug's twin and the decoy pair (a honeypot)
    # recorded to 0.1 s: a one-run command stopped early may round to 0.0 on a fast machine
    assert rows["runs_made"].tolist() == [1, 3] and (rows["wall_s"] >= 0).all()
    assert rows["wall_s"].iloc[1] > 0


def test_a_failing_detector_is_summed_up_once_not_printed_per_run(tmp_path, capsys):
    """A detector that fails on every run (as overfit_probe does at setup on the causal LM)
    is recorded in each run and named once, in one line, after the sweep."""
    site = faults.install(tmp_path / "site")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        patch.setenv("PYTHONPATH", faults.env_with(site)["PYTHONPATH"])
        assert cli_main(["bench", "--scenarios", "mlp-double_softmax", "--seeds", "0",
                         "--workers", "1", "--out", str(tmp_path / "sweep"), "--no-progress",
                         "--no-overhead", "--detectors", "boom", "harness.steps=10",
                         "harness.eval_interval=5"]) == 0
    err = capsys.readouterr().err
    assert err.count("detector boom failed") == 1, err
    assert "detector boom failed on 4 of 4 runs (first: observe: RuntimeError: boom at step 3)" \
        in err
