"""The reference exercises: E.9.1 plant-a-NaN-and-hunt and E.9.2 overfit a single batch."""

from __future__ import annotations

import pytest
from conftest import named

from bugzoo.cli import main
from bugzoo.teach.exercises import nan_hunt


def test_overfit_batch_passes_clean_and_fails_broken(capsys):
    """The check's verdict, and past the scenario the student typed, nothing of its bug."""
    assert main(["exercise", "overfit-batch", "--scenario", "mlp-clean"]) == 0
    assert "PASS" in capsys.readouterr().out
    for bug in ("double_softmax", "frozen_from_start"):
        assert main(["exercise", "overfit-batch", "--scenario", f"mlp-{bug}"]) == 1
        header, report = capsys.readouterr().out.split("\n", 1)
        assert f"mlp-{bug}" in header and "FAIL" in report
        assert not (found := named(report, bug)), found
    assert main(["exercise", "overfit-batch", "--scenario", "mlp-nope"]) == 2


def test_nan_hunt_guide_and_alarm(capsys):
    assert main(["exercise"]) == 0 and "nan-hunt" in capsys.readouterr().out
    assert main(["exercise", "nan-hunt"]) == 0
    assert "Which detector output points at the NaN" in capsys.readouterr().out
    lines = nan_hunt()
    at_onset = [line for line in lines if line.split()[:2] == ["step", "50"]]
    assert any("isfinite_hooks" in line and "'backbone.3'" in line for line in at_onset)
    assert any("anomaly" in line and "LogBackward" in line for line in at_onset)
    assert not any(line.startswith("step") and int(line.split()[1]) < 50 for line in lines)


@pytest.mark.slow
def test_nan_hunt_shows_a_student_the_alarms_and_the_line_not_the_answer():
    """What the run prints stops at what a student should see: the alarms, the line of model
    code anomaly mode points at, how the run ended; no traceback, no warning, no file of the
    catalogue that would name the bug."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "bugzoo.cli", "exercise", "nan-hunt", "--run"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = done.stdout + done.stderr
    assert "ends at:  return torch.log(x - x.detach().min() + 1e-9)" in shown
    for leak in ("bugzoo/bugs", "Traceback", "Warning"):
        assert leak not in shown, leak
    assert not (found := named(shown, "planted_log_layer")), found
    assert len(shown.splitlines()) <= 6


def test_the_nan_hunt_guide_names_neither_the_layer_nor_the_fix():
    """The student hunts: the guide says what to run and what to look for, and only the answer
    names the layer, the operation and the fix."""
    from bugzoo.teach.exercises import ANSWERS, GUIDES

    _, guide = GUIDES["nan-hunt"]
    prose = "\n".join(line for line in guide.splitlines() if "bugzoo run" not in line)
    for giveaway in ("second", "Linear", "log", "lower bound", "backbone"):
        assert giveaway not in prose, giveaway
    assert "'backbone.3'" in ANSWERS["nan-hunt"] and "torch.log" in ANSWERS["nan-hunt"]
