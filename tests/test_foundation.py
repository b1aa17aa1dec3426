"""Foundation: datasets, models, the clean loop, `bugzoo run`, determinism, clean baselines."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from conftest import quick_cfg

from bugzoo.cli import main
from bugzoo.data import Batch, load_dataset
from bugzoo.harness.runner import execute
from bugzoo.judge.overfit import overfit_single_batch
from bugzoo.judge.validity import ENTROPY_MARGIN, GENERATION_MARGIN
from bugzoo.models import MODELS
from bugzoo.train import Trainer


@pytest.mark.parametrize("name", ["tabular", "reviews", "images"])
def test_dataset_is_seeded_with_three_disjoint_splits(name):
    a, b = load_dataset(name, seed=0), load_dataset(name, seed=0)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.holdout.y, b.holdout.y)
    assert len(a.train) > len(a.val) > 0 and len(a.holdout) > 0
    counts = torch.bincount(a.train.y, minlength=a.num_classes)
    assert counts.min() > 0.5 * counts.float().mean()  # every class well represented


def test_tabular_features_span_orders_of_magnitude():
    data = load_dataset("tabular", seed=0)
    assert data.num_classes >= 4
    scale = data.train.x.std(0)
    assert scale.max() / scale.min() > 1e3


def test_images_channels_far_from_standard():
    data = load_dataset("images", seed=0)
    assert data.num_classes >= 4 and data.train.x.shape[1:] == (3, 16, 16)
    mean = data.train.x.mean(dim=(0, 2, 3))
    assert (mean.abs() > 10).all()


def test_reviews_padding_and_label_independent_of_length():
    data = load_dataset("reviews", seed=0)
    lengths, y = data.train.lengths.float(), data.train.y
    assert lengths.min() <= 6 and lengths.max() >= 30  # widely spread lengths
    assert (data.train.x[:, -1] == data.pad_id).float().mean() > 0.5  # lots of padding
    for row, n in zip(data.train.x[:50], data.train.lengths[:50], strict=True):
        assert (row[n:] == data.pad_id).all() and (row[:n] != data.pad_id).all()
    corr = torch.corrcoef(torch.stack([lengths, y.float()]))[0, 1]
    assert abs(corr) < 0.05


@pytest.mark.parametrize("model", MODELS.names())
def test_initial_loss_close_to_log_c(model):
    trainer = Trainer(quick_cfg(f"model={model}")).build()
    data, net = trainer.data, trainer.model.eval()
    index = torch.arange(256)
    batch = Batch(data.train.inputs(index), data.train.y[index])
    with torch.no_grad():
        loss = trainer.compute_loss(net(*batch.inputs), trainer.targets(batch))
    assert abs(loss.item() - math.log(data.num_classes)) < 0.1 * math.log(data.num_classes)


@pytest.mark.parametrize("model", MODELS.names())
def test_single_batch_overfit(model):
    result = overfit_single_batch(quick_cfg(f"model={model}"), steps=300)
    assert result["passed"], f"{model}: loss still {result['final_loss']:.3f} after 300 steps"


CLASSIFIERS = [name for name in MODELS.names() if name != "gpt"]
# these tests read the trained model's scores alone: no validation pass on the way
FINAL_EVAL_ONLY = ("harness.eval_interval=300",)


@pytest.mark.parametrize("model", CLASSIFIERS)
def test_clean_baseline_accuracy(model):
    summary = execute(quick_cfg(f"model={model}", *FINAL_EVAL_ONLY, steps=300)).summary
    assert summary["outcome"] == "completed"
    assert summary["final_val_acc"] >= 0.85
    assert abs(summary["holdout_acc"] - summary["final_val_acc"]) <= 0.05


@pytest.mark.slow
def test_the_language_model_lands_near_the_sources_entropy_and_writes_like_it_reads():
    summary = execute(quick_cfg("model=gpt", *FINAL_EVAL_ONLY, steps=300)).summary
    floor = summary["entropy_floor"]
    assert summary["outcome"] == "completed"
    assert floor < summary["final_val_loss"] <= floor + ENTROPY_MARGIN
    assert abs(summary["holdout_loss"] - summary["final_val_loss"]) <= 0.02
    assert summary["generation_gap"] <= GENERATION_MARGIN


def test_same_seed_gives_bitwise_identical_trace():
    a = execute(quick_cfg("model=mlp", "seed=5")).summary["trace_digest"]
    b = execute(quick_cfg("model=mlp", "seed=5")).summary["trace_digest"]
    c = execute(quick_cfg("model=mlp", "seed=6")).summary["trace_digest"]
    assert a == b != c


def test_bugzoo_run_writes_config_trace_and_summary(tmp_path, capsys):
    out = tmp_path / "runs"
    code = main(["run", "model=lstm", "harness.steps=30", "harness.eval_interval=10", "seed=3",
                 f"harness.out_dir={out}"])
    assert code == 0
    folder = out / "single" / "lstm-clean" / "seed3"
    summary = json.loads((folder / "summary.json").read_text())
    for key in ("model", "seed", "steps", "initial_loss", "expected_initial_loss",
                "final_val_acc", "holdout_acc", "wall_s"):
        assert key in summary
    assert summary["model"] == "lstm" and summary["seed"] == 3 and summary["steps"] == 30
    trace = pd.read_parquet(folder / "trace.parquet")
    assert len(trace) == 30
    assert {"step", "loss", "lr", "grad_norm", "param_norm", "update_norm", "elapsed_s",
            "val_loss", "val_acc"} <= set(trace.columns)
    assert trace["val_acc"].notna().sum() == 3
    assert "model:" in (folder / "config.yaml").read_text()
    assert "holdout" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["run", "model=lstmm"], "did you mean 'lstm'"),
    (["run", "harness.steps=-3"], "harness.steps must be a positive integer"),
    (["run", "seed=abc"], "seed must be an integer"),
    (["run", "harness.precision=fp8"], "unknown harness.precision"),
    (["frobnicate"], "unknown command"),
])
def test_bad_input_is_one_line_exit_2(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err and "Traceback" not in err
