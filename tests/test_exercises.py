"""The reference exercises: E.9.1 plant-a-NaN-and-hunt and E.9.2 overfit a single batch."""

from __future__ import annotations

from bugzoo.cli import main
from bugzoo.teach.exercises import nan_hunt


def test_overfit_batch_passes_clean_and_fails_broken(capsys):
    assert main(["exercise", "overfit-batch", "--scenario", "mlp-clean"]) == 0
    assert "PASS" in capsys.readouterr().out
    for broken in ("mlp-double_softmax", "mlp-frozen_from_start"):
        assert main(["exercise", "overfit-batch", "--scenario", broken]) == 1
        assert "FAIL" in capsys.readouterr().out
    assert main(["exercise", "overfit-batch", "--scenario", "mlp-nope"]) == 2


def test_nan_hunt_guide_and_alarm(capsys):
    assert main(["exercise"]) == 0 and "nan-hunt" in capsys.readouterr().out
    assert main(["exercise", "nan-hunt"]) == 0
    assert "Which detector output points at the NaN" in capsys.readouterr().out
    lines = nan_hunt()
    first = lines[0]
    assert first.split()[1] == "50" and "anomaly" in first and "LogBackward" in first
