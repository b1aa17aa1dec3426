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
    at_onset = [line for line in lines if line.split()[:2] == ["step", "50"]]
    assert any("isfinite_hooks" in line and "'backbone.3'" in line for line in at_onset)
    assert any("anomaly" in line and "LogBackward" in line for line in at_onset)
    assert not any(line.startswith("step") and int(line.split()[1]) < 50 for line in lines)


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
    for leak in ("planted_log_layer", "bugzoo/bugs", "Traceback", "Warning"):
        assert leak not in shown, leak
    assert len(shown.splitlines()) <= 6
