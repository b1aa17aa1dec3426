"""The GPU pass: its dry run on the CPU writes every stage's files, its set-up finds the carried
wheels, and the docs quote the committed GPU figures (``results/gpu/``)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import doc_section, quick_cfg

from bugzoo.cli import main as cli
from bugzoo.harness.runner import execute
from bugzoo.judge import gpu, gpu_setup

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "results" / "gpu"


@pytest.fixture(scope="module")
def dry_pass(tmp_path_factory):
    """The whole dry pass, as the command runs it (in this process: its runs are forked from
    the test process's fork server, which other tests' sweeps have started already)."""
    runs = tmp_path_factory.mktemp("gpu-dry")
    # one worker: the pass's sweeps are a few tiny runs each
    status = cli(["results", "gpu", "--dry-run", "--workers", "1", "--runs", str(runs),
                  "--out", str(runs / "files"), "--budget-s", "100000"])
    return status, runs / "files"


@pytest.mark.slow
def test_the_dry_pass_writes_every_stage_file(dry_pass):
    status, out = dry_pass
    assert status == 0
    for stage in gpu.STAGES:
        text = (out / f"{stage}.md").read_text()
        assert "Dry run on the CPU" in text and f"torch {torch.__version__}" in text
        assert "Made by `bugzoo results gpu --dry-run" in text
    committed = {p.name for p in GPU.iterdir()}
    # the GPU files are the dry run's, but for the stages no GPU has run yet (named in README)
    not_yet = {"lite.md", "lite.csv"}
    assert {p.name for p in out.iterdir()} - not_yet == committed, "the dry run writes the files"
    for table in out.glob("*.csv"):
        assert list(pd.read_csv(table).columns[:2]) == ["device", "torch"], table.name


def test_a_finished_stage_is_skipped_and_redo_makes_it_again(dry_pass, capsys):
    _, out = dry_pass
    runs = out.parent
    before = (out / "environment.md").stat().st_mtime_ns
    assert cli(["results", "gpu", "--dry-run", "--stages", "environment", "--runs", str(runs),
                "--out", str(out)]) == 0
    assert (out / "environment.md").stat().st_mtime_ns == before
    assert cli(["results", "gpu", "--dry-run", "--stages", "environment", "--redo", "--runs", str(runs),
                "--out", str(out)]) == 0
    assert (out / "environment.md").stat().st_mtime_ns > before


def test_a_stage_that_does_not_fit_the_budget_is_left_for_the_next_pass(tmp_path, capsys):
    assert cli(["results", "gpu", "--dry-run", "--budget-s", "3", "--runs", str(tmp_path)]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    left = [name for name in gpu.STAGES if gpu.STAGES[name].dry_s > 2]
    assert summary.endswith(f"left for the next pass (they did not fit): {', '.join(left)}")
    assert (tmp_path / "files" / "environment.md").is_file()
    assert not any((tmp_path / "files" / f"{name}.md").exists() for name in left)


def test_a_gpu_stage_is_planned_for_the_cores_it_finds():
    assert gpu.planned_s("catalogue", dry=False, cores=16) == 8 * 60
    assert gpu.planned_s("catalogue", dry=False, cores=8) == 2 * 8 * 60
    assert gpu.planned_s("catalogue", dry=False, cores=64) == 8 * 60  # no faster than planned
    assert gpu.planned_s("catalogue", dry=True, cores=2) == gpu.STAGES["catalogue"].dry_s


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    assert cli(["results", "gpu", "--dry-run", "--stages", "catalog", "--runs", str(tmp_path)]) == 2
    assert "unknown stage 'catalog'; did you mean 'catalogue'?" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert cli(["results", "gpu", "--runs", str(tmp_path)]) == 2
        assert "no CUDA device here" in capsys.readouterr().err


def test_the_sign_check_reads_each_direction():
    assert gpu.shows("higher", 2.0, 1.0) and not gpu.shows("lower", 2.0, 1.0)
    assert gpu.shows("event", True, False) and not gpu.shows("event", True, True)
    assert gpu.shows("higher", None, 1.0)  # the buggy run crashed before it was measured
    assert gpu.shows("varies", 1.0, 2.0) is None


def test_each_buggy_run_is_compared_with_its_own_platforms_twin():
    def runs(buggy: float, twin: float, crashed_twin: bool = False) -> pd.DataFrame:
        return pd.DataFrame([
            {"scenario": "mlp-double_softmax", "seed": 0, "role": "buggy",
             "bug": "double_softmax", "final_val_loss": buggy, "outcome": "completed"},
            {"scenario": "mlp-double_softmax", "seed": 0, "role": "control",
             "bug": "double_softmax", "final_val_loss": twin, "outcome": "completed"},
            {"scenario": "mlp-double_softmax", "seed": 1, "role": "buggy",
             "bug": "double_softmax", "final_val_loss": 0.0, "outcome": "completed"},
            {"scenario": "mlp-clean", "seed": 0, "role": "clean", "bug": None,
             "final_val_loss": 9.0, "outcome": "completed"}])

    [row] = gpu.beside_cpu(runs(2.0, 1.0), runs(1.0, 2.0)).itertuples()
    assert (row.scenario, row.cuda_buggy, row.cuda_control, row.cpu_buggy, row.cpu_control) == (
        "mlp-double_softmax", 2.0, 1.0, 1.0, 2.0)
    assert row.cuda_shows and not row.cpu_shows and row.agreement == "differs"


def test_setup_installs_only_missing_wheels_and_names_a_missing_one(tmp_path):
    for package, version in gpu_setup.CARRIED.items():
        (tmp_path / f"{gpu_setup.wheel_name(package, version)}py3-none-any.whl").touch()
    chosen = gpu_setup.wheels_to_install(tmp_path, installed=lambda p, v: p == "omegaconf")
    assert [w.name.split("-")[0] for w in chosen] == ["hydra_core", "antlr4_python3_runtime"]
    (tmp_path / "hydra_core-1.3.8-py3-none-any.whl").unlink()
    with pytest.raises(gpu_setup.MissingWheel, match=r"no wheel of hydra-core==1\.3\.8 .*"
                       r"gpu_setup download"):
        gpu_setup.wheels_to_install(tmp_path, installed=lambda *_: False)


def test_setup_carries_the_versions_this_checkout_runs():
    from importlib import metadata

    for package, version in gpu_setup.CARRIED.items():
        assert metadata.version(package) == version, package


def test_the_deterministic_setting_reaches_torch_and_is_checked(capsys):
    try:
        execute(quick_cfg("harness.deterministic=true", steps=3))
        assert torch.are_deterministic_algorithms_enabled()
        execute(quick_cfg(steps=3))
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    assert cli(["run", "harness.deterministic=maybe"]) == 2
    assert "harness.deterministic must be true or false" in capsys.readouterr().err


def gpu_table(name: str) -> pd.DataFrame:
    return pd.read_csv(GPU / f"{name}.csv")


def test_the_gpu_files_come_from_a_cuda_machine():
    for table in GPU.glob("*.csv"):
        assert pd.read_csv(table)["device"].str.contains("H100|H200|NVIDIA").all(), table.name
    for page in GPU.glob("*.md"):
        assert "Dry run" not in page.read_text(), page.name


def test_the_docs_quote_the_gpu_figures():
    # one line (figures may wrap), the quoted figures' markers left out
    section = " ".join(re.sub(r"<!--/?fig[^>]*-->", "", doc_section("On a GPU")[1]).split())
    assert f"torch {gpu_table('overhead')['torch'].iloc[0]}" in section
    catalogue = gpu_table("catalogue")
    same = int((catalogue["agreement"] == "same").sum())
    assert f"{same} of {len(catalogue)} buggy scenarios" in section
    differs = catalogue[catalogue["agreement"] == "differs"]
    assert f"differs for {len(differs)}" in section and differs["latent"].all()
    board = gpu_table("catalogue_leaderboard").set_index("detector").loc["suite: built-ins"]
    assert (f"{board['score']:.2f} [{board['score_lo']:.2f}, {board['score_hi']:.2f}]"
            in section)
    assert f"{int(board['false_alarms'])} of {int(board['clean_runs'])} clean runs" in section
    ratio = gpu_table("overhead").set_index(["variant", "model"])["median_x"]
    models = ("mlp", "lstm", "transformer", "resnet")
    for variant in ("telemetry", "suite: built-ins", "nan_hooks", "isfinite_hooks"):
        assert " / ".join(f"{ratio[variant, m]:.2f}" for m in models) in section, variant
    shares = gpu_table("data_time").set_index("scenario")
    for model in models:
        row = shares.loc[f"{model}-dataloader_bottleneck"]
        assert f"{row['data_share_buggy']:.2f} vs {row['data_share_clean']:.2f}" in section
    repeat = gpu_table("repeat")
    assert f"{int(repeat['identical'].sum())} of {len(repeat)} scenarios" in section
    resnet = repeat[repeat["scenario"].str.startswith("resnet-")]
    assert f"{int((~resnet['identical']).sum())} of {len(resnet)} resnet" in section
    late = repeat.set_index("scenario").loc["resnet-clean-warmup_freeze50"]
    assert f"parts at step {int(late['first_differing_step'])}," in section
    transformer = repeat[repeat["scenario"].str.startswith("transformer-") & ~repeat["identical"]
                         & ~repeat["scenario"].str.endswith("nondeterministic_seed")]
    assert f"{len(transformer)} transformer scenarios" in section
    assert transformer["max_loss_diff"].max() <= 2e-4
    determinism = gpu_table("determinism")
    deterministic = determinism[determinism["deterministic"]]
    assert f"all {len(deterministic)} clean scenarios" in section
    assert deterministic["identical"].all()
    precision = gpu_table("precision").set_index("scenario")
    fp16 = precision.loc["mlp-fp16_no_scaler"]
    assert f"p = {fp16['p_value']:.2f}" in section and not fp16["valid"]
    assert precision.loc["mlp-adam_eps_fp16", "valid"]
    mismatch = gpu_table("device_mismatch")
    assert mismatch["valid"].all() and f"{len(mismatch)} of {len(mismatch)} models" in section
