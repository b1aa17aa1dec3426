"""TensorBoard: a stored run written as event files and read back — the trace as scalars, the
per-layer gradient norms, each alarm as text at its step — with the run folder untouched.
The example in docs/pages/integrations.md is what runs."""

from __future__ import annotations

import hashlib
import math
import shlex
from pathlib import Path

from conftest import doc_examples

from bugzoo.cli import main
from bugzoo.harness import store


def test_a_run_reads_back_from_its_event_files(tmp_path, monkeypatch, capsys):
    from tensorboard.backend.event_processing.event_accumulator import (  # only this test
        EventAccumulator,
    )

    monkeypatch.chdir(tmp_path)
    [example] = doc_examples("TensorBoard", "bash")
    *commands, server = example.strip().splitlines()
    assert server == "tensorboard --logdir results/runs/tensorboard"  # starts a server: not run
    run = Path("results/runs/single/mlp-lr_too_high/seed0")
    before = None
    for line in commands:
        if "tensorboard" in line:
            before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()}
        assert main(shlex.split(line)[1:]) == 0
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()} == before

    events = EventAccumulator(str(Path("results/runs/tensorboard/single/mlp-lr_too_high/seed0")),
                              size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    trace, alarms = store.read_trace(run), store.read_alarms(run)
    loss = events.Scalars("trace/loss")
    assert [e.step for e in loss] == list(trace["step"])
    assert all(math.isclose(e.value, v) or math.isnan(v) and math.isnan(e.value)
               for e, v in zip(loss, trace["loss"], strict=True))
    assert [e.step for e in events.Scalars("trace/val_acc")] == list(
        trace.loc[trace["val_acc"].notna(), "step"])  # evaluation steps only
    layers = store.read_layers(run)
    first = layers["layer"].iloc[0]
    assert len(events.Scalars(f"layer_grad_norm/{first}")) == (layers["layer"] == first).sum()
    for detector, mine in alarms.groupby("detector"):
        texts = events.Tensors(f"alarms/{detector}/text_summary")
        assert [t.step for t in texts] == list(mine["step"])
        assert mine["message"].iloc[0] in texts[0].tensor_proto.string_val[0].decode()
    assert "nonfinite" in set(alarms["detector"])  # a run that diverges: there are alarms

    capsys.readouterr()
    assert main(["tensorboard", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is neither a run folder" in err and "\n" not in err
