"""The setup digest tells a bug that *is* a setting or a structure from its disarmed twin, and
leaves a plant that waits behind its seam the same as its twin."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from bugzoo_detectors.integrity import fingerprint
from conftest import quick_cfg

from bugzoo.bugs import get_bug
from bugzoo.harness.setup_digest import describe_setup, setup_digest
from bugzoo.harness.watch import run_view
from bugzoo.judge.outcomes import visible_at_setup
from bugzoo.train import Trainer


def views(scenario: str):
    """The run views of a scenario's buggy run and of its disarmed twin, built, not trained
    (each from its own copy of the configuration, which a plant may edit)."""
    cfg = quick_cfg(f"scenario={scenario}")
    bug = get_bug(cfg.bug.id)
    return [run_view(Trainer(copy.deepcopy(cfg), bug, armed=armed).build())
            for armed in (True, False)]


@pytest.mark.parametrize(("scenario", "part"), [
    ("mlp-lr_too_high", "optimizer"), ("mlp-missing_activation", "model"),
    ("mlp-no_shuffle_sorted", "train_loader"), ("mlp-nll_on_logits", "loss")])
def test_a_bug_in_the_setup_changes_the_digest_where_it_lives(scenario, part):
    buggy, twin = views(scenario)
    assert setup_digest(buggy) != setup_digest(twin)
    a, b = describe_setup(buggy), describe_setup(twin)
    assert part in [k for k in a if a[k] != b[k]]


def test_a_patch_that_waits_for_its_seam_leaves_the_setup_alike():
    buggy, twin = views("mlp-double_softmax")
    assert setup_digest(buggy) == setup_digest(twin)


def test_the_settings_reader_reads_nothing_the_digest_leaves_out():
    """Two setups with one digest give ``settings_reader`` one fingerprint, so on the headline
    (pairs alike at setup) it alarms alike on both runs of every pair and scores exactly 0."""
    for scenario in ("mlp-lr_too_high", "mlp-narrow_bottleneck", "mlp-batch_size_positional"):
        buggy, twin = views(scenario)
        assert fingerprint(buggy) != fingerprint(twin)
        assert setup_digest(buggy) != setup_digest(twin)


def test_a_scenario_is_visible_when_any_of_its_pairs_differs():
    rows = [("a", 1, "buggy", "x"), ("a", 1, "control", "x"), ("a", 2, "buggy", "y"),
            ("a", 2, "control", "z"), ("b", 1, "buggy", "x"), ("b", 1, "control", None),
            ("c", 1, "clean", "q")]
    table = pd.DataFrame(rows, columns=["scenario", "seed", "run_role", "setup_digest"])
    assert visible_at_setup(table).tolist() == [True, True, True, True, False, False, False]
    assert not visible_at_setup(table.drop(columns="setup_digest")).any()


def test_check_bug_tells_the_author_when_a_bug_will_be_scored_apart():
    from bugzoo.judge.bugcheck import check_blind, settings

    said = {b: check_blind(get_bug(b), settings(get_bug(b), ["mlp"])[0])
            for b in ("lr_too_high", "double_softmax")}
    assert "scores it apart" in said["lr_too_high"]
    assert "scores it apart" not in said["double_softmax"]
