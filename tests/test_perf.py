"""``bugzoo perf``: the speed tables are produced and hold sane figures (no timing targets here)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.judge import perf, sweep_profile


@pytest.fixture
def perf_out(tmp_path):
    return tmp_path


def test_overhead_table_has_every_detector_alone_and_together(perf_out):
    assert main(["results", "perf", "overhead", "--model", "mlp", "--detectors", "nonfinite",
                 "stale_grads", "--out", str(perf_out)]) == 0
    table = pd.read_csv(perf_out / "overhead.csv")
    assert list(table["variant"]) == ["bare", "telemetry", "nonfinite", "stale_grads",
                                      "suite: built-ins", "all detectors"]
    assert table.loc[table["variant"] == "bare", "median_x"].item() == 1.0
    assert (table["median_x"] > 0).all() and (table["step_ms"] > 0).all()
    assert "bugzoo results perf overhead --model mlp" in (perf_out / "overhead.md").read_text()


def test_sweep_efficiency_runs_the_sweep_serially_and_in_parallel(perf_out):
    assert main(["results", "perf", "sweep", "--scenarios", "mlp-clean", "mlp-double_softmax",
                 "--workers", "2", "--out", str(perf_out)]) == 0
    table = pd.read_csv(perf_out / "sweep.csv")
    assert list(zip(table["compositions"], table["workers"], strict=True)) == [
        ("composed", 1), ("composed", 2), ("kept", 1), ("kept", 2)]
    assert (table["runs"] == 2).all()
    # serial: the runs' own time is a share of the sweep's wall time, never more
    serial = table.iloc[0]
    assert 0 < serial["efficiency"] <= 1
    assert serial["efficiency"] == serial["efficiency_vs_serial"]
    assert (table["sum_run_s"] <= table["wall_s"] * table["workers"]).all()
    assert (table["sum_serial_run_s"] == serial["sum_run_s"]).all()


def test_sweep_rejects_absurd_worker_count(perf_out, capsys):
    out = perf_out / "perf"
    assert main(["results", "perf", "sweep", "--workers", "0", "--out", str(out)]) == 2
    assert "--workers must be between 1" in capsys.readouterr().err
    assert not out.exists()


def test_anomaly_mode_of_one_variant_does_not_leak_into_the_others():
    import torch

    watched = perf.LoopVariant("mlp", "detectors", ["anomaly"])
    assert watched.anomaly[0] and not torch.is_anomaly_enabled()
    seen = []
    watched.trainer.model.register_forward_hook(
        lambda *_: seen.append(torch.is_anomaly_enabled()))
    watched.block(1)
    bare = perf.LoopVariant("mlp", "bare", [])
    bare.trainer.model.register_forward_hook(lambda *_: seen.append(torch.is_anomaly_enabled()))
    bare.block(1)
    watched.close()
    assert seen == [True, False] and not torch.is_anomaly_enabled()


def test_the_stopwatch_gives_each_phase_its_own_time_and_puts_the_code_back(monkeypatch):
    from bugzoo.train import Trainer

    clock = [0.0]  # seconds, moved on by the timed functions themselves
    monkeypatch.setattr(sweep_profile, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    watch = sweep_profile.Stopwatch(sweep_profile.ABSORBING)

    def spend(seconds: float) -> None:
        clock[0] += seconds

    timed_inner = watch.wrap("inner", lambda: spend(3))

    def outer():
        spend(2)
        timed_inner()

    watch.wrap("outer", outer)()
    assert (watch.seconds["outer"], watch.seconds["inner"]) == (2, 3)
    absorbing = next(iter(sweep_profile.ABSORBING))
    watch.wrap(absorbing, outer)()  # what runs inside the twin run is the twin run's
    assert (watch.seconds[absorbing], watch.seconds["inner"]) == (5, 3)

    original = Trainer.__dict__["run_step"]
    with sweep_profile.stopwatch():
        assert Trainer.__dict__["run_step"] is not original
    assert Trainer.__dict__["run_step"] is original


@pytest.mark.slow
def test_the_profile_splits_the_runs_and_the_slots_without_remainder(perf_out):
    assert main(["results", "perf", "profile", "--scenarios", "mlp-double_softmax", "--workers", "2",
                 "--model", "mlp", "--no-progress", "--out", str(perf_out)]) == 0
    phases = pd.read_csv(perf_out / "profile.csv").set_index("phase")
    total, parts = phases.iloc[-1], phases.iloc[:-1]
    # the bug beside its disarmed twin, and the decoy pair every bench runs for its model
    assert phases.index[-1] == "all 4 pooled runs"
    assert parts["seconds"].sum() == pytest.approx(total["seconds"], abs=0.05)
    assert (parts["seconds"] >= 0).all()
    assert parts.loc["training steps", "seconds"] > parts.loc["writing the run folder "
                                                              "(Parquet, JSON)", "seconds"] > 0
    assert parts.loc["detector calls", "seconds"] > 0  # the default detectors watched
    slots = pd.read_csv(perf_out / "profile_sweep.csv").set_index("part")["seconds"]
    # each figure is rounded to 0.1 s on its own: up to 0.05 s off apiece
    assert slots["slot time (wall x workers)"] == pytest.approx(2 * slots["wall time"],
                                                                abs=0.15 + 1e-9)
    assert (slots["held by pooled runs"] + slots.filter(like="held by isolated").sum()
            + slots.filter(like="idle").sum()) == pytest.approx(
                slots["slot time (wall x workers)"], abs=0.2 + 1e-9)
    assert "bugzoo results perf profile --scenarios mlp-double_softmax" in (
        perf_out / "profile.md").read_text()
    per_step = pd.read_csv(perf_out / "profile_telemetry.csv").set_index("us_per_step")["mlp"]
    parts = per_step.drop(index=[sweep_profile.STEP, "telemetry, all parts",
                                 "step with telemetry / step without"])
    assert (parts > 0).all() and per_step[sweep_profile.STEP] > 0
    assert per_step["telemetry, all parts"] == pytest.approx(parts.sum(), abs=0.05)
    assert per_step["step with telemetry / step without"] == pytest.approx(
        1 + parts.sum() / per_step[sweep_profile.STEP], abs=0.01)
