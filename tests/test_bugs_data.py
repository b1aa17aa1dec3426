"""Data, tensor-shape, performance and reproducibility bugs manifest against clean runs."""

from __future__ import annotations

import pytest
from manifests import check_manifests

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.errors import UsageError

SHORT = ["harness.steps=80", "harness.eval_interval=40"]


@pytest.mark.parametrize("scenario", [
    "mlp-no_shuffle_sorted", "mlp-labels_misaligned", "mlp-labels_one_indexed",
    "mlp-wrong_normalization", "mlp-softmax_wrong_dim", "mlp-corrupted_inputs",
    "mlp-dataloader_bottleneck",
])
def test_mlp_symptom(scenario):
    result = check_manifests(scenario, [0, 1], SHORT)
    assert result.separates(), result


@pytest.mark.parametrize("scenario", ["lstm-silent_broadcast", "lstm-padding_not_ignored"])
def test_sequence_symptom(scenario):
    result = check_manifests(scenario, [0, 1],
                           ["harness.steps=60", "harness.eval_interval=60"])
    assert result.separates(), result


@pytest.mark.parametrize("scenario,steps", [("lstm-truncated_sequences", 160),
                                            ("resnet-augmentation_on_val", 150)])
def test_symptom_after_the_model_has_learned(scenario, steps):
    """Bugs whose symptom is a lower accuracy than a clean model's: visible only once the
    clean model is past its first plateau (at 60-80 steps the two still overlap)."""
    result = check_manifests(scenario, [0, 1],
                           [f"harness.steps={steps}", f"harness.eval_interval={steps // 2}"])
    assert result.separates(), result


def test_truncated_sequences_cut_training_and_validation_not_holdout():
    from bugzoo.train import Trainer

    cfg = compose_run(["scenario=lstm-truncated_sequences"])
    trainer = Trainer(cfg, get_bug("truncated_sequences")).build()
    limit = int(cfg.bug.params.max_tokens)
    assert int(trainer.data.train.lengths.max()) == limit
    assert int(trainer.data.val.lengths.max()) == limit
    assert int(trainer.data.holdout.lengths.max()) > limit


def test_eval_on_train_inflates_validation():
    result = check_manifests("mlp-eval_on_train", [0, 1, 2],
                           ["harness.steps=150", "harness.eval_interval=150"])
    assert result.separates(), result


def test_nondeterministic_seed_traces_differ_clean_ones_do_not():
    result = check_manifests("mlp-nondeterministic_seed", [0, 1],
                           ["harness.steps=10", "harness.eval_interval=10"])
    assert result.buggy == [True, True] and result.clean == [False, False]


def test_dataloader_bottleneck_keeps_the_values():
    from bugzoo.harness.runner import execute

    cfg = ["scenario=mlp-dataloader_bottleneck", "harness.steps=10"]
    buggy, clean = execute(compose_run(cfg)), execute(compose_run([*cfg, "~bug"]))
    assert buggy.summary["trace_digest"] == clean.summary["trace_digest"]


def test_device_mismatch_is_refused_without_cuda():
    assert get_bug("device_mismatch").requires == ("cuda",)
    with pytest.raises(UsageError, match="requires CUDA"):
        compose_run(["scenario=mlp-device_mismatch", "harness.device=cpu"])


def test_augmentation_on_val_randomises_validation_only():
    from bugzoo.train import Trainer

    cfg = compose_run(["scenario=resnet-augmentation_on_val"])
    trainer = Trainer(cfg, get_bug("augmentation_on_val")).build()
    first, second = (next(iter(trainer.val_loader)).inputs[0] for _ in range(2))
    assert not first.equal(second)  # two passes over the same images differ
    clean = Trainer(compose_run(["scenario=resnet-augmentation_on_val", "~bug"]), None).build()
    assert next(iter(trainer.train_loader)).inputs[0].equal(
        next(iter(clean.train_loader)).inputs[0])


def test_leakage_feature_selection_scores_features_on_validation_labels_too():
    """The plant: the buggy selection keeps other features than the training split alone picks,
    and validation then looks better than the holdout in every seed, which the clean one does
    not."""
    from bugzoo.train import Trainer

    clean = Trainer(compose_run(["scenario=mlp-clean-feature_selection"])).build()
    buggy = Trainer(compose_run(["scenario=mlp-leakage_feature_selection"]),
                    get_bug("leakage_feature_selection")).build()
    assert clean.data.train.x.shape[1] == buggy.data.train.x.shape[1] == 20
    assert not (clean.data.train.x == buggy.data.train.x).all()
    result = check_manifests("mlp-leakage_feature_selection", [0, 1, 2],
                             ["harness.steps=150", "harness.eval_interval=150"])
    assert result.separates(), result
