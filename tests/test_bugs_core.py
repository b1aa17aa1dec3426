"""The headline bugs manifest against clean runs of the same settings, and stay silent before onset."""

from __future__ import annotations

import pytest
import torch
from manifests import check_manifests

from bugzoo.config import compose_run
from bugzoo.harness.runner import execute
from bugzoo.telemetry import TIMING_COLUMNS
from bugzoo.train import Trainer

SHORT = ["harness.steps=60", "harness.eval_interval=60"]
SEEDS = [0, 1]

# (bug, model, extra overrides): short settings where the declared symptom separates clearly.
CASES = [
    ("double_softmax", "mlp", SHORT),
    ("double_softmax", "resnet", ["harness.steps=30", "harness.eval_interval=30"]),
    ("missing_zero_grad", "mlp", SHORT),
    ("missing_zero_grad", "transformer", SHORT),
    ("frozen_layers", "mlp", [*SHORT, "optim.freeze_backbone_steps=20"]),
    ("frozen_layers", "lstm", [*SHORT, "optim.freeze_backbone_steps=20"]),
    ("frozen_from_start", "mlp", SHORT),
    ("frozen_from_start", "transformer", SHORT),
    ("leakage_val_in_train", "mlp", ["harness.steps=150", "harness.eval_interval=150"]),
    ("leakage_val_in_train", "transformer", ["harness.steps=80", "harness.eval_interval=80"]),
]


def all_worse(result) -> bool:
    """Every buggy value lies beyond every clean value in the symptom's direction."""
    if result.direction == "higher":
        return min(result.buggy) > max(result.clean)
    return max(result.buggy) < min(result.clean)


@pytest.mark.parametrize(("bug", "model", "extra"), CASES, ids=[f"{m}-{b}" for b, m, _ in CASES])
def test_symptom_separates(bug, model, extra):
    result = check_manifests(f"{model}-{bug}", SEEDS, extra)
    assert all_worse(result), (result.metric, result.buggy, result.clean)


def test_fp16_no_scaler_underflows_more_gradients():
    """Without loss scaling, more fp16 gradient entries flush to exactly zero (every seed)."""
    result = check_manifests("mlp-fp16_no_scaler", SEEDS,
                             ["harness.steps=300", "harness.eval_interval=300"],
                             mechanism=("mean_zero_grad_frac", "higher"))
    assert all_worse(result), (result.buggy, result.clean)


def built(*overrides: str) -> Trainer:
    from bugzoo.bugs import get_bug

    cfg = compose_run(list(overrides))
    return Trainer(cfg, get_bug(cfg.bug.id) if cfg.get("bug") else None).build()


def test_mask_after_softmax_rows_lose_mass_only_with_padding():
    trainer = built("scenario=transformer-mask_after_softmax")
    tokens, lengths = trainer.data.train.inputs(torch.arange(4))
    assert tokens.shape[1] == lengths.max() <= 32  # trained on batches padded to their longest
    assert trainer.data.serve_pad_to == 256 and trainer.data.val.x.shape[1] >= 256
    attention = trainer.model.backbone.layers[0].attn
    scores = torch.randn(2, 2, 5, 5)
    padded = torch.tensor([[False, False, False, True, True], [False] * 5])[:, None, None, :]
    rows = attention.attention_weights(scores, padded).sum(-1)
    assert torch.all(rows[0] < 1 - 1e-3)  # padded example: weight leaked to masked keys
    torch.testing.assert_close(rows[1], torch.ones_like(rows[1]))  # no padding: unchanged


@pytest.mark.slow
def test_mask_after_softmax_scores_served_reviews_worse():
    """The same validation reviews lose accuracy when served padded to a fixed width (the
    serving check), while the clean model scores them identically (exactly, whatever it
    learned: one short control run shows it). Two seeds here; results/validity.md proves the
    scenario over 5."""
    settings = ["harness.eval_interval=150", "data.params.serve_pad_to=128"]
    buggy = [execute(compose_run(["scenario=transformer-mask_after_softmax", "harness.steps=150",
                                  *settings, f"seed={seed}"])).summary for seed in range(2)]
    assert min(run["serving_gap"] for run in buggy) > 0, [run["serving_gap"] for run in buggy]
    clean = execute(compose_run(["scenario=transformer-clean-serving_pad256", "harness.steps=40",
                                 *settings])).summary
    assert clean["serving_gap"] == 0 and len(clean["padding"]) >= 2


def test_leakage_norm_stats_fits_on_train_and_val():
    clean = built("model=mlp")
    buggy = built("scenario=mlp-leakage_norm_stats")
    assert clean.data.train.x.mean(0).abs().max() < 1e-4  # clean: train split standardised
    both = torch.cat([buggy.data.train.x, buggy.data.val.x])
    assert both.mean(0).abs().max() < 1e-4  # buggy: train + val standardised together
    assert buggy.data.train.x.mean(0).abs().max() > 1e-3


def stable(trace):
    return trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace.columns])


@pytest.mark.parametrize(("scenario", "onset"), [
    ("mlp-missing_zero_grad", "++bug.onset=30"),
    ("mlp-frozen_layers", "optim.freeze_backbone_steps=30"),
], ids=["missing_zero_grad", "frozen_layers"])
def test_trace_equals_clean_before_onset(scenario, onset):
    settings = [f"scenario={scenario}", "harness.steps=40", "harness.eval_interval=20"]
    buggy = execute(compose_run([*settings, onset]))
    clean_onset = [] if onset.startswith("++bug") else [onset]  # same warm-up freeze when clean
    clean = execute(compose_run([*settings, *clean_onset, "~bug"]))
    assert buggy.summary["onset"] == 30
    b, c = stable(buggy.trace), stable(clean.trace)
    assert b.iloc[:30].equals(c.iloc[:30])
    assert not b.iloc[30:].equals(c.iloc[30:])
