"""Data-pipeline bugs (catalogue 1.1): each plant does the literal thing to the loader, the
batches or the splits. Cheap: built trainers and a few batches, no training runs."""

from __future__ import annotations

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.train import Trainer


def built(scenario: str, *overrides: str, bug: bool = True) -> Trainer:
    """A built trainer of a scenario, with its bug (or, ``bug=False``, its clean control)."""
    cfg = compose_run([f"scenario={scenario}", *overrides, *(() if bug else ("~bug",))])
    return Trainer(cfg, get_bug(cfg.bug.id) if bug else None).build()


def test_batch_size_positional_yields_one_shuffled_row_per_step():
    buggy, clean = built("mlp-batch_size_positional"), built("mlp-batch_size_positional", bug=False)
    assert buggy.train_loader.batch_size is True and buggy.train_loader.shuffle == 32
    first, second = (next(iter(buggy.train_loader)) for _ in range(2))
    assert len(first.y) == len(second.y) == 1
    assert len(buggy.train_loader) == len(buggy.data.train)  # one step per example
    assert not first.inputs[0].equal(second.inputs[0])  # still shuffled: truthy 32
    assert len(next(iter(clean.train_loader)).y) == 32


def test_batch_collapsed_keeps_the_first_example_and_its_label_from_the_onset():
    trainer = built("mlp-batch_collapsed", "bug.onset=1")
    batch = next(iter(trainer.train_loader))
    trainer.step = 0
    before = trainer.to_device(batch)
    assert before.y.equal(batch.y) and before.inputs[0].equal(batch.inputs[0])
    trainer.step = 1
    after = trainer.to_device(batch)
    assert after.y.tolist() == batch.y[:1].tolist() and len(batch.y) == 32
    assert after.inputs[0].equal(batch.inputs[0][:1])


def test_class_filtered_out_drops_class_zero_from_training_only():
    buggy, clean = built("mlp-class_filtered_out"), built("mlp-class_filtered_out", bug=False)
    assert (buggy.data.train.y == 0).sum() == 0 and (clean.data.train.y == 0).sum() > 500
    assert len(buggy.data.train) == int((clean.data.train.y > 0).sum())
    assert buggy.data.val.y.equal(clean.data.val.y)  # validation keeps the class
    assert set(buggy.data.train.y.unique().tolist()) == set(range(1, buggy.data.num_classes))


def test_debug_subset_left_on_trains_on_the_first_rows():
    buggy, clean = built("mlp-debug_subset_left_on"), built("mlp-debug_subset_left_on", bug=False)
    rows = int(buggy.cfg.bug.params.rows)
    assert len(buggy.data.train) == rows == 64 and len(clean.data.train) == 4000
    assert buggy.data.train.y.equal(clean.data.train.y[:rows])
    assert len(buggy.train_loader) == 2 and len(buggy.data.val) == len(clean.data.val)


def test_feature_selection_by_pvalue_keeps_the_least_informative_features():
    buggy = built("mlp-feature_selection_by_pvalue")
    clean = built("mlp-feature_selection_by_pvalue", bug=False)
    data = clean.normalize(clean.load_data())  # every column, before selection
    f = clean.score_features(data)
    p = buggy.score_features(data)
    assert (p[f.argsort()].diff() <= 0).all()  # the larger F, the smaller its p-value
    assert (p[:16] < 1e-30).all()  # the informative columns: tiny p-values
    k = int(clean.cfg.data.select_k)
    kept_clean = f.topk(k).indices.sort().values
    kept_buggy = p.topk(k).indices.sort().values
    assert kept_clean.tolist() == list(range(16))  # clean: exactly the informative columns
    assert (kept_buggy >= 16).all()  # buggy: only noise columns
    assert set(kept_buggy.tolist()) == set(f.topk(k, largest=False).indices.tolist())
    assert buggy.data.train.x.shape[1] == k


def test_shuffle_after_batching_shuffles_whole_single_class_batches():
    buggy = built("mlp-shuffle_after_batching")
    loader = buggy.train_loader
    split = loader.split
    assert (split.y.diff() >= 0).all()  # stored grouped by class
    epochs = [list(loader), list(loader)]
    for batches in epochs:
        assert len(batches) == len(split) // 32
        single = sum(len(b.y.unique()) == 1 for b in batches)
        assert single >= len(batches) - buggy.data.num_classes  # all but the boundary ones
    # the same batches each epoch (cut once, in storage order), in a new order
    contents = [[(tuple(b.y.tolist()), float(b.inputs[0].sum())) for b in batches]
                for batches in epochs]
    assert contents[0] != contents[1] and sorted(contents[0]) == sorted(contents[1])
    clean = built("mlp-shuffle_after_batching", bug=False)
    mixed = sum(len(b.y.unique()) > 1 for b in clean.train_loader)
    assert mixed == len(clean.train_loader)  # clean batches mix the classes
