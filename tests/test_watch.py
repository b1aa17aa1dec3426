"""bugzoo.watch on plain PyTorch loops, `bugzoo watch -- python SCRIPT` and `bugzoo check-trace`."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
import torch
from torch import nn

import bugzoo
from bugzoo.cli import main
from bugzoo.integrations.recorder import ALARMS_FILE, check_trace, read_trace
from bugzoo.teach.export import export


def tiny_loop(lr: float, steps: int, watched: dict | None = None, explicit: bool = False):
    """A plain loop as a tutorial writes it; ``watched`` holds bugzoo.watch's options (the
    watch itself is returned), or None for no watch. Returns (model, losses, watch)."""
    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses, watch = [], None

    def train(w=None):
        for _ in range(steps):
            batch = torch.randint(0, 256, (32,))
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            if w is not None and explicit:
                w.step(loss)
            losses.append(loss.item())

    if watched is None:
        train()
    else:
        with bugzoo.watch(model, optimizer, num_classes=3, steps=steps, **watched) as watch:
            train(watch)
    return model, losses, watch


@pytest.mark.parametrize("explicit", [False, True])
def test_watching_changes_nothing_the_loop_computes_bitwise(explicit):
    plain_model, plain_losses, _ = tiny_loop(0.05, 40)
    model, losses, watch = tiny_loop(0.05, 40, {}, explicit)
    assert losses == plain_losses
    for a, b in zip(plain_model.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)
    records = watch.records()  # every step watched, each with the loss the loop computed
    assert [r.step for r in records] == list(range(40))
    assert [r.loss for r in records] == pytest.approx(losses, rel=1e-6)
    assert records[0].lr == 0.05 and records[0].training


def test_a_diverging_loop_alarms_and_its_saved_trace_rescores_to_the_same_alarms(tmp_path):
    _, losses, watch = tiny_loop(40.0, 60, {"trace": tmp_path / "run"})
    assert watch.alarms, "a loop at lr 40 should alarm"
    live = pd.DataFrame(watch.alarms)[["detector", "step", "symptom", "category", "message"]]
    stored = pd.read_csv(tmp_path / "run" / ALARMS_FILE)
    again = check_trace(tmp_path / "run")
    pd.testing.assert_frame_equal(again.reset_index(drop=True), live.reset_index(drop=True))
    pd.testing.assert_frame_equal(stored, live.reset_index(drop=True), check_dtype=False)
    facts, records = read_trace(tmp_path / "run")
    assert facts.num_classes == 3 and facts.steps == 60 and len(records) == 60


@pytest.mark.parametrize("explicit", [False, True])
def test_stop_on_alarm_ends_the_loop_at_the_first_alarm_and_the_with_block_quietly(explicit):
    _, losses, watch = tiny_loop(40.0, 60, {"stop_on_alarm": True}, explicit)
    first = min(a["step"] for a in watch.alarms)
    assert len(watch.records()) == first + 1
    # given by w.step, the alarming step's loss ends the run there; found in the loop, its
    # record is complete when the next step begins, which then stops before its update
    assert len(losses) == (first if explicit else first + 1)


def test_bugzoo_watch_runs_an_exported_script_unchanged_and_alarms_on_the_buggy_one(
        tmp_path, monkeypatch, capsys):
    export("mlp-missing_zero_grad", tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["watch", "--", "python", "buggy.py"]) == 0
    out, err = capsys.readouterr()
    assert "SYMPTOM final_val_loss=" in out  # the script's own output, as it prints it
    assert "bugzoo alarm at step" in err
    alarms = pd.read_csv(tmp_path / "buggy.trace" / ALARMS_FILE)
    assert len(alarms) >= 1
    facts, records = read_trace(tmp_path / "buggy.trace")
    assert (facts.num_classes, facts.steps, len(records)) == (4, 200, 200)  # CLASSES, STEPS
    assert main(["check-trace", str(tmp_path / "buggy.trace")]) == 0
    assert alarms["detector"].iloc[0] in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["watch", "python", "train.py"], "unrecognized arguments"),
    (["watch", "--"], "runs a Python script"),
    (["watch", "--", "python", "missing.py"], "script missing.py not found"),
    (["watch", "--", "ls"], "runs a Python script"),
    (["watch", "--detectors", "mode_check", "--", "python", __file__], "not sealed"),
    (["check-trace", "/nonexistent"], "not a trace folder"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
