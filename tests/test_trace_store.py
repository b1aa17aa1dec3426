"""A stored run keeps every Observation field a detector can read: the trace's scalars, each
step's per-layer gradient norms, and the RunView facts replay hands a detector."""

from __future__ import annotations

import math
from pathlib import Path

from conftest import quick_cfg

from bugzoo.detector import Detector
from bugzoo.harness import store
from bugzoo.harness.record import trace_digest
from bugzoo.harness.runner import execute_and_store


class Recorder(Detector):
    """Keeps every Observation it is shown (a test double that raises nothing)."""

    name = "recorder"

    def setup(self, run):
        super().setup(run)
        self.seen = []

    def observe(self, obs):
        self.seen.append(obs)
        return []


def test_a_stored_run_keeps_every_observation_field(tmp_path):
    recorder = Recorder()
    result, path = execute_and_store(quick_cfg("model=mlp", steps=12), tmp_path, "sw",
                                     [recorder])
    layers = store.read_layers(path)
    assert list(layers.columns) == ["step", "layer", "grad_norm"]
    for obs in recorder.seen:
        mine = layers[layers["step"] == obs.step]
        stored = dict(zip(mine["layer"], mine["grad_norm"], strict=True))
        assert list(stored) == list(obs.layer_grad_norms)  # named_parameters() order
        assert stored == obs.layer_grad_norms and len(stored) == 6
    trace = store.read_trace(path)
    assert "layer_grad_norms" not in trace.columns  # trace.parquet keeps its columns
    assert trace_digest(trace) == result.summary["trace_digest"]
    summary = store.read_summary(path)
    run = recorder.run
    assert (summary["num_classes"], summary["dataset"], summary["model"], summary["steps"]) == (
        run.num_classes, run.dataset, run.model_name, run.steps)
    assert math.isclose(summary["expected_initial_loss"], math.log(run.num_classes))


def test_a_run_stored_before_layer_norms_were_kept_still_reads(tmp_path):
    result, path = execute_and_store(quick_cfg("model=mlp", steps=5), tmp_path, "sw")
    (Path(path) / store.LAYERS_FILE).unlink()  # as an older bugzoo left it
    assert store.read_layers(path) is None
    assert len(store.read_trace(path)) == 5
