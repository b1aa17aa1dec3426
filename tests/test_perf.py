"""``bugzoo perf``: the speed tables are produced and hold sane figures (no timing targets here)."""

from __future__ import annotations

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.judge import perf


@pytest.fixture
def perf_out(tmp_path):
    return tmp_path


def test_overhead_table_has_every_detector_alone_and_together(perf_out):
    assert main(["perf", "overhead", "--models", "mlp", "--detectors", "nonfinite",
                 "stale_grads", "--out", str(perf_out)]) == 0
    table = pd.read_csv(perf_out / "overhead.csv")
    assert list(table["variant"]) == ["bare", "telemetry", "nonfinite", "stale_grads",
                                      "suite: built-ins", "all detectors"]
    assert table.loc[table["variant"] == "bare", "median_x"].item() == 1.0
    assert (table["median_x"] > 0).all() and (table["step_ms"] > 0).all()
    assert "bugzoo perf overhead --models mlp" in (perf_out / "overhead.md").read_text()


def test_sweep_efficiency_runs_the_sweep_serially_and_in_parallel(perf_out):
    assert main(["perf", "sweep", "--scenarios", "mlp-clean", "mlp-double_softmax",
                 "--workers", "2", "--out", str(perf_out)]) == 0
    table = pd.read_csv(perf_out / "sweep.csv")
    assert list(table["workers"]) == [1, 2]
    assert (table["runs"] == 2).all()
    # serial: the runs' own time is a share of the sweep's wall time, never more
    serial = table.iloc[0]
    assert 0 < serial["efficiency"] <= 1
    assert serial["sum_serial_run_s"] <= serial["wall_s"]


def test_sweep_rejects_absurd_worker_count(perf_out, capsys):
    out = perf_out / "perf"
    assert main(["perf", "sweep", "--workers", "0", "--out", str(out)]) == 2
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
