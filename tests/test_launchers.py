"""Hydra launchers: a ``bugzoo run -m`` sweep lands in the same results store layout and scores
identically whether the basic, joblib or submitit_local launcher runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from bugzoo.config import CONF_DIR, compose_run
from bugzoo.detector_registry import DETECTORS
from bugzoo.harness import store
from bugzoo.judge.scoring import score_sweep

SCENARIOS = ["mlp-clean", "mlp-lr_too_high"]  # quiet, false alarms and hits within 20 steps
WATCHING = ["nonfinite", "loss_plateau", "grad_explosion"]
LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5"],
}
TIMING = ("median_delay_s", "overhead", "delay_s")  # column prefixes that measure wall time


def bugzoo_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bugzoo.cli", "run", *args],
                          capture_output=True, text=True, timeout=300)


def launch_sweeps(root: Path) -> dict[str, Path]:
    """The same sweep of 2 scenarios at seed 0, once per launcher, into one results root."""
    found = {}
    for name, launcher in LAUNCHERS.items():
        scenarios = SCENARIOS + (["mlp-device_mismatch"] if name == "basic" else [])
        proc = bugzoo_run("-m", f"scenario={','.join(scenarios)}", "seed=0",
                          "harness.steps=20", "harness.eval_interval=10", "harness.device=cpu",
                          f"detector=[{','.join(WATCHING)}]", f"harness.out_dir={root}",
                          f"harness.sweep={name}", f"hydra.sweep.dir={root}/hydra-{name}",
                          *launcher)
        assert proc.returncode == 0, proc.stderr[-3000:]
        found[name] = root / name
    return found


def runs(sweep_dir: Path) -> dict[str, Path]:
    return {f"{p.parent.name}/{p.name}": p for p in store.iter_runs(sweep_dir)}


def without_timing(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[c for c in frame.columns if c.startswith(TIMING)])


def check_store_layout(sweeps: dict[str, Path]) -> None:
    expected = {f"{s}/seed0" for s in SCENARIOS}
    for name, sweep_dir in sweeps.items():
        assert set(runs(sweep_dir)) == expected, name
        for path in runs(sweep_dir).values():
            assert {f.name for f in path.iterdir()} == {
                "config.yaml", "trace.parquet", "layer_grad_norms.parquet", "alarms.parquet",
                "summary.json"}
            config = yaml.safe_load((path / "config.yaml").read_text())
            assert config["harness"]["sweep"] == name
            assert config["harness"]["threads"] == 1  # one torch thread per job
            assert set(store.read_summary(path)["detectors"]) == set(WATCHING)


def check_cuda_only_skipped(sweeps: dict[str, Path]) -> None:
    assert not (sweeps["basic"] / "mlp-device_mismatch").exists()
    logs = "".join(p.read_text() for p in (sweeps["basic"].parent / "hydra-basic").rglob("*.log"))
    assert "skipping mlp-device_mismatch seed 0: needs CUDA" in logs


def check_identical_runs(sweeps: dict[str, Path]) -> None:
    basic = runs(sweeps["basic"])
    for name in ("joblib", "submitit"):
        for key, path in runs(sweeps[name]).items():
            a, b = store.read_summary(basic[key]), store.read_summary(path)
            assert (a["trace_digest"], a["outcome"]) == (b["trace_digest"], b["outcome"]), key
            pd.testing.assert_frame_equal(store.read_alarms(basic[key]), store.read_alarms(path))


def check_identical_scores(sweeps: dict[str, Path]) -> None:
    boards, tables = {}, {}
    for name, sweep_dir in sweeps.items():
        score_sweep(sweep_dir)
        boards[name] = without_timing(pd.read_csv(sweep_dir / "leaderboard.csv"))
        tables[name] = without_timing(pd.read_csv(sweep_dir / "outcomes.csv"))
    assert set(boards["basic"]["detector"]) == {*WATCHING, "suite: built-ins"}
    assert (tables["basic"]["outcome"] == "hit").any()  # the comparison sees real alarms
    for name in ("joblib", "submitit"):
        pd.testing.assert_frame_equal(boards["basic"], boards[name])
        pd.testing.assert_frame_equal(tables["basic"], tables[name])


def test_basic_joblib_and_submitit_sweeps_fill_one_store_and_score_identically(tmp_path):
    """One test (not a shared fixture), so ``pytest -n`` runs the three sweeps once."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweeps = launch_sweeps(tmp_path)
    check_store_layout(sweeps)
    check_cuda_only_skipped(sweeps)
    check_identical_runs(sweeps)
    check_identical_scores(sweeps)


def test_every_registered_detector_is_a_choice_of_the_detector_group():
    names = DETECTORS.names()
    cfg = compose_run(["scenario=mlp-clean", f"detector=[{','.join(names)}]"])
    assert {name: dict(params) for name, params in cfg.detector.items()} == {n: {} for n in names}
    assert not (CONF_DIR / "detector").exists(), "detector configs are made from the registry"


def test_detectors_multi_select():
    cfg = compose_run(["scenario=mlp-clean", "detector=[nonfinite,loss_plateau]"])
    assert set(cfg.detector) == {"nonfinite", "loss_plateau"}
    assert not compose_run(["scenario=mlp-clean"]).detector


def test_slurm_launcher_config_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", return_hydra_config=True, overrides=[
            "hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu",
            "hydra.launcher.timeout_min=30", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.gpus_per_node=1", "hydra.launcher.array_parallelism=64",
            "hydra.sweep.dir=/shared/bugzoo/hydra"])
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.timeout_min, launcher.array_parallelism) == ("gpu", 30, 64)
    assert launcher.submitit_folder == "/shared/bugzoo/hydra/.submitit/%j"
