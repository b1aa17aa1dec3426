"""Hydra launchers: a ``bugzoo run -m`` sweep lands in the same results store layout and scores
identically whether the basic, joblib or submitit_local launcher runs it."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from bugzoo.cli import main as cli_main
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
    assert set(boards["basic"]["detector"]) == {*WATCHING, "suite: built-ins"}  # no twins here,
    # so no setup_reader floor row (it takes a model's default setup from the twins)
    assert (tables["basic"]["outcome"] == "hit").any()  # the comparison sees real alarms
    for name in ("joblib", "submitit"):
        pd.testing.assert_frame_equal(boards["basic"], boards[name])
        pd.testing.assert_frame_equal(tables["basic"], tables[name])


@pytest.mark.slow
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


# ----------------------------------------------------------------------------- bench --launcher
BENCH = ["--scenarios", "mlp-lr_too_high", "mlp-double_softmax", "--seeds", "0",
         "--detectors", "nonfinite,loss_plateau", "--no-overhead", "--no-progress",
         "--workers", "1", "harness.steps=20", "harness.eval_interval=10"]


def bench(out: Path, *extra: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return cli_main(["bench", *BENCH, "--out", str(out), *extra])


@pytest.mark.slow
def test_bench_through_submitit_local_scores_as_the_local_pool_and_resumes(tmp_path):
    """The bench's own plan (buggy runs, their twins, detectors) as 2 submitit_local jobs gives
    the local pool's board; a run lost from the folder is the only one a rerun (on joblib)
    makes."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweeps = {"pool": tmp_path / "pool", "submitit": tmp_path / "submitit"}
    assert bench(sweeps["pool"]) == 0
    assert bench(sweeps["submitit"], "--launcher", "submitit_local", "--jobs", "2",
                 "hydra.launcher.timeout_min=10") == 0
    pool, cluster = runs(sweeps["pool"]), runs(sweeps["submitit"])
    real = {f"{s}/seed0{tag}" for s in BENCH[1:3] for tag in ("", ".control")}
    assert set(pool) == set(cluster) and real <= set(pool)
    decoys = set(pool) - real  # the mlp's decoy pair, impersonating one of the two
    assert {key.split("/")[1] for key in decoys} == {"seed0.honeypot", "seed0.honeypot.control"}
    for key, path in cluster.items():
        a, b = store.read_summary(pool[key]), store.read_summary(path)
        assert (a["trace_digest"], a["outcome"]) == (b["trace_digest"], b["outcome"]), key
    boards = {name: without_timing(pd.read_csv(path / "leaderboard.csv"))
              for name, path in sweeps.items()}
    assert set(boards["pool"]["detector"]) >= {"nonfinite", "loss_plateau"}
    pd.testing.assert_frame_equal(boards["pool"], boards["submitit"])
    jobs = sorted((sweeps["submitit"] / ".launch").glob("*/.submitit/*/*_result.pkl"))
    assert len(jobs) == 2, jobs  # two jobs, each with its share

    lost = cluster["mlp-double_softmax/seed0.control"]
    kept = {key: path.joinpath("summary.json").stat().st_mtime_ns
            for key, path in cluster.items() if path != lost}
    shutil.rmtree(lost)
    # joblib's workers start their children with a method of their own (loky)
    assert bench(sweeps["submitit"], "--launcher", "joblib", "hydra.launcher.n_jobs=1") == 0
    assert store.is_complete(lost)
    assert kept == {key: path.joinpath("summary.json").stat().st_mtime_ns
                    for key, path in runs(sweeps["submitit"]).items() if path != lost}
    pd.testing.assert_frame_equal(
        boards["pool"],
        without_timing(pd.read_csv(sweeps["submitit"] / "leaderboard.csv")))


@pytest.mark.parametrize("argv, expected", [
    (["--launcher", "slurmm"], "unknown launcher 'slurmm'"),
    (["--jobs", "2"], "--jobs configure"),
    (["hydra.launcher.partition=gpu"], "hydra.* items configure"),
    (["--launcher", "basic", "--jobs", "0"], "--jobs must be between 1"),
    (["--launcher", "submitit_local", "hydra.launcher.partiton=gpu"],
     "launcher submitit_local cannot take hydra.launcher.partiton=gpu"),
])
def test_bench_launcher_mistakes_are_one_line(tmp_path, argv, expected):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["bench", "--scenarios", "mlp-double_softmax", "--out", str(tmp_path / "b"),
                         *argv])
    assert code == 2 and expected in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    assert not (tmp_path / "b").exists()  # refused before the sweep folder was made


def test_runs_a_failed_job_did_not_store_fail_the_bench_without_a_board(
        tmp_path, monkeypatch, capsys):
    from bugzoo.harness import launch

    def broken(tasks, workers):
        raise OSError("node lost")
        yield

    monkeypatch.setattr(launch, "run_tasks", broken)
    assert bench(tmp_path / "b", "--launcher", "basic") == 1
    err = capsys.readouterr().err
    # two bugs beside their twins, and the mlp's decoy pair
    assert "6 of 6 runs are not stored" in err and "Run the same command again" in err
    assert not (tmp_path / "b" / "leaderboard.csv").exists()  # no board from a partial sweep


def test_the_documented_cluster_benches_are_valid_commands():
    from bugzoo.judge.bench import check_launcher_options, parse

    root = Path(__file__).parents[1]
    found = []
    for doc in (root / "README.md", root / "docs" / "pages" / "scaling.md"):
        for block in re.findall(r"```bash\n(bugzoo bench .*?)```", doc.read_text(), re.S):
            argv = shlex.split(block.replace("\\\n", " "))[2:]
            args, overrides, launcher = parse(argv)
            check_launcher_options(args, launcher)
            found.append((args.launcher, args.jobs, args.split))
    assert found and all(f == ("submitit_slurm", 40, "test") for f in found), found


def test_the_launch_progress_bar_counts_runs_as_the_jobs_store_them(tmp_path, monkeypatch,
                                                                     capsys):
    from bugzoo.harness import launch

    stored: set[Path] = set()
    monkeypatch.setattr(launch.store, "is_complete", lambda path: path in stored)
    tasks = [SimpleNamespace(path=tmp_path / f"run{i}") for i in range(3)]
    with launch.stored_progress(tasks, True, every_s=0.01):
        for task in tasks[:2]:
            stored.add(task.path)
            time.sleep(0.05)
        stored.add(tasks[2].path)  # as the last job ends: the bar's last look still counts it
    assert "3/3" in capsys.readouterr().err


def test_a_submitit_job_may_run_for_its_shares_expected_time_with_margin():
    from bugzoo.harness import launch

    pooled = SimpleNamespace(expected_cost=10.0, isolate=False, timeout_s=300.0)
    risky = SimpleNamespace(expected_cost=10.0, isolate=True, timeout_s=300.0)
    cut = [[pooled] * 12, [pooled] * 6 + [risky]]
    # share one: 3 x 120 s / 2 workers = 3 min; share two, with a run that may hang:
    # (3 x 70 s + 300 s) / 2 = 4.25 min, the longer one: 5 minutes, plus 10 of slack
    assert launch._time_limit("submitit_slurm", [], cut, 2) == [
        "hydra.launcher.timeout_min=15"]
    assert launch._time_limit("submitit_local", ["hydra.launcher.timeout_min=7"], cut, 2) == []
    assert launch._time_limit("joblib", [], cut, 2) == []
