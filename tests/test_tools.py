"""Real third-party debugging tools as optional detectors (``pip install '.[tools]'``)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import shutil
from dataclasses import MISSING

import pandas as pd
import pytest
from bugzoo_detectors.cockpit import Cockpit

from bugzoo.config import compose_run
from bugzoo.detector_registry import (
    DETECTORS,
    default_detectors,
    detector_class,
    load_detector,
    unavailable,
)
from bugzoo.harness import store, traceset
from bugzoo.harness.runner import execute, execute_and_store
from bugzoo.judge.sealed import score_runs
from bugzoo.telemetry import TIMING_COLUMNS, Observation
from bugzoo.trace import RunFacts

HAS_COCKPIT = Cockpit.available() is None
HAS_TRAINCHECK = importlib.util.find_spec("traincheck") is not None and all(
    shutil.which(f"traincheck-{verb}") for verb in ("collect", "infer", "check"))


def test_adapters_import_and_register_without_their_tools():
    assert "cockpit" in DETECTORS.names()
    reason = unavailable("cockpit")
    assert (reason is None) == HAS_COCKPIT
    if reason:
        assert "bugzoo-bench[tools]" in reason


def test_default_suite_skips_missing_tools_and_costly_adapters(monkeypatch, caplog):
    from bugzoo_detectors.nonfinite import NonFiniteSentinel

    caplog.set_level("INFO")
    assert "cockpit" not in default_detectors()  # costly: only when named
    assert "anomaly" not in default_detectors()
    assert "nonfinite" in default_detectors()
    # a tool that runs only when named is not missed when it is missing
    monkeypatch.setattr(Cockpit, "available", staticmethod(lambda: "cockpit not installed"))
    assert "cockpit" not in default_detectors() and "cockpit" not in caplog.text
    # a member of the default suite that cannot run here is left out with its reason
    monkeypatch.setattr(NonFiniteSentinel, "available", staticmethod(lambda: "no sentinel"))
    assert "nonfinite" not in default_detectors()
    assert "skipping detector nonfinite: no sentinel" in caplog.text


def test_cockpit_setup_names_the_extra_when_missing(monkeypatch):
    monkeypatch.setattr(Cockpit, "available", staticmethod(lambda: "missing (bugzoo-bench[tools])"))
    cfg = compose_run(["scenario=mlp-clean", "harness.steps=2"])
    result = execute(cfg, [_cockpit()])
    assert "ImportError" in result.summary["detectors"]["cockpit"]["error"]
    assert "bugzoo-bench[tools]" in result.summary["detectors"]["cockpit"]["error"]


def _cockpit() -> Cockpit:
    detector = Cockpit()
    detector.name = "cockpit"
    return detector


def _run(scenario: str, detectors=()):
    return execute(compose_run([f"scenario={scenario}", "harness.steps=40",
                                "harness.eval_interval=20", "seed=0"]), list(detectors))


@pytest.mark.skipif(not HAS_COCKPIT, reason="Cockpit/BackPACK not installed (extra: tools)")
def test_cockpit_flags_missing_zero_grad_not_clean_and_leaves_the_run_unchanged():
    clean, plain = _run("mlp-clean", [_cockpit()]), _run("mlp-clean")
    assert clean.summary["detectors"]["cockpit"]["error"] is None
    assert clean.alarms.empty
    # the shadow must not touch the live run: same trace (timings aside) with and without it
    cols = [c for c in plain.trace.columns if c not in TIMING_COLUMNS]
    assert clean.trace[cols].equals(plain.trace[cols])
    buggy = _run("mlp-missing_zero_grad", [_cockpit()])
    assert list(buggy.alarms["symptom"]) == ["cockpit_grad_norm_growth"]
    assert buggy.alarms["category"].iloc[0] == "optim"


def test_traincheck_scores_exported_buggy_scripts_against_controls_and_healthy_variants():
    from bugzoo.teach.export import healthy_variants, supported
    from bugzoo.tools.traincheck import scripts

    every = scripts(None)
    buggy = [s for s in every if s.bug]
    clean = [s for s in every if s.bug is None]
    assert [s.scenario for s in buggy] == [s for s in supported() if s.startswith("mlp-")]
    names = {s.scenario for s in clean}
    assert "mlp-clean" in names and {f"mlp-clean-{v}" for v in healthy_variants()} <= names
    assert len({s.text for s in clean}) == len(clean)  # each clean script once
    # a control whose scenario changes the settings of both scripts is scored too
    assert "mlp-log_of_zero-control" in names and "mlp-double_softmax-control" not in names
    twins = {scenario for s in clean for scenario, _ in s.controls}
    assert twins == {s.scenario for s in buggy}  # every buggy script has its fixed twin
    assert all("${SEED}" in s.text for s in every) and "= 7," in scripts(7)[0].text


def test_traincheck_outcomes_judge_each_violation_and_calibration_drops_unstable_ones():
    from bugzoo.tools.traincheck import CALIBRATED, RAW, VARIANTS, Script, run_outcomes

    result = {"violations": [
        {"display_name": "Adam.step() precedes zero_grad()", "relation_type": "Lead",
         "first_step": 3},
        {"display_name": "seed-dependent", "relation_type": "Consistent", "first_step": 0}]}
    dropped = {CALIBRATED: {"seed-dependent"},
               VARIANTS: {"seed-dependent", "Adam.step() precedes zero_grad()"}}
    buggy = {r["detector"]: r for r in run_outcomes(
        Script("mlp-missing_zero_grad", "missing_zero_grad", ""), 2, result, dropped)}
    assert buggy[RAW]["outcome"] == "hit" and buggy[RAW]["alarm_step"] == 0
    assert buggy[CALIBRATED]["outcome"] == "hit" and buggy[CALIBRATED]["alarm_step"] == 3
    assert buggy[RAW]["role"] == "tool" and buggy[RAW]["category"] == "loop"
    assert buggy[VARIANTS]["outcome"] == "miss"  # every violation dropped
    assert buggy[RAW]["diagnosed"] is False  # an invariant names no bug category
    twin = Script("mlp-clean", None, "", (("mlp-missing_zero_grad", "missing_zero_grad"),))
    control = {r["detector"]: (r["outcome"], r["run_role"], r["scenario"]) for r in run_outcomes(
        twin, 2, {"violations": result["violations"][1:]}, {CALIBRATED: {"seed-dependent"}})}
    assert control == {RAW: ("false_alarm", "control", "mlp-missing_zero_grad"),
                       CALIBRATED: ("quiet", "control", "mlp-missing_zero_grad")}
    variant = run_outcomes(Script("mlp-clean-wide", None, ""), 2, result, {})
    assert [r["run_role"] for r in variant] == ["clean"]
    unproven = run_outcomes(Script("mlp-train_mode_not_restored", "train_mode_not_restored", ""),
                            2, result, {})
    assert all(r["unproven"] for r in unproven)
    failed = run_outcomes(Script("mlp-clean-wide", None, ""), 2, {"error": "collect failed"},
                          {CALIBRATED: set()})
    errors = [(r["outcome"], r["detector_error"]) for r in failed]
    assert errors == [("quiet", "collect failed")] * 2


@pytest.mark.skipif(not HAS_TRAINCHECK, reason="TrainCheck not installed (extra: tools)")
def test_traincheck_flags_missing_zero_grad_and_scores_it(tmp_path):
    from bugzoo.tools.traincheck import score_offline

    runs, table = score_offline(tmp_path, steps=8, check_seeds=(2,), train_seeds=(0,),
                                calibration_seeds=(1,), only=["mlp-missing_zero_grad"])
    assert list(runs["scenario"]) == ["mlp-missing_zero_grad"]
    buggy = table.set_index("detector").loc["traincheck_calibrated"]
    assert buggy["outcome"] == "hit"
    checks = json.loads((tmp_path / "result_mlp-missing_zero_grad_seed2.json").read_text())
    assert any("zero_grad" in v["display_name"] for v in checks["violations"])


@pytest.mark.skipif(not HAS_COCKPIT, reason="Cockpit/BackPACK not installed (extra: tools)")
def test_cockpit_stands_down_on_a_model_backpack_cannot_handle():
    detector = _cockpit()
    result = execute(compose_run(["scenario=transformer-clean", "harness.steps=3"]), [detector])
    assert "LayerNorm" in detector.stood_down
    assert result.summary["detectors"]["cockpit"]["error"] is None and result.alarms.empty


NUMERIC_TOOLS = ["hf_overflow", "torch_grad_norm", "lightning_spikes"]
QUIET_ON_THE_TWIN = ["hf_overflow", "torch_grad_norm"]  # SpikeDetection flags noisy losses too


def _pair(scenario: str, name: str):
    """The buggy run and its disarmed twin, each watched by the tool ``name``."""
    cfg = compose_run([f"scenario={scenario}", "seed=0"])
    return [execute(cfg, [load_detector(name)], armed=armed) for armed in (True, False)]


@pytest.mark.parametrize("name", QUIET_ON_THE_TWIN)
def test_each_numeric_tool_alarms_on_a_nan_from_log_of_zero_and_not_on_its_twin(name):
    """A loss whose log reaches 0 turns the tool's signal non-finite: the buggy run alarms
    after the onset, the twin (the same run, the plant disarmed) stays quiet, and neither run
    is stopped by the tool, which would stop a user's training."""
    buggy, twin = _pair("mlp-log_of_zero", name)
    assert buggy.summary["detectors"][name]["error"] is None
    assert len(buggy.alarms) == 1 and buggy.alarms["step"].iloc[0] > 0
    assert twin.alarms.empty
    assert len(buggy.trace) == len(twin.trace)  # trained to the end


def _spikes_on(losses: list[float]) -> list[int]:
    detector = load_detector("lightning_spikes")
    detector.setup(RunFacts("mlp", None, 4, len(losses), 0.0, "cpu"))
    fields = {f.name: 0.0 for f in dataclasses.fields(Observation) if f.default is MISSING
              and f.default_factory is MISSING}
    return [a.step for step, loss in enumerate(losses) for a in detector.observe(
        Observation(**{**fields, "step": step, "loss": loss, "nonfinite_loss": False,
                       "nonfinite_grads": 0, "scale": None, "training": True}))]


def test_lightnings_spike_detection_flags_as_lightning_does_and_once():
    """On its defaults: a loss more than twice the running mean of the last 10 above it, or a
    non-finite one, stops Lightning's training; here it is one alarm, at that step."""
    assert _spikes_on([1.0] * 20 + [2.9] + [1.0] * 5) == []  # 1.9 above the mean: not 2x
    assert _spikes_on([1.0] * 20 + [3.1, 1.0, 5.0]) == [20]
    assert _spikes_on([1.0] * 5 + [math.nan, math.nan]) == [5]
    assert _spikes_on([3.0 - 0.1 * s for s in range(20)]) == []  # falling is never a spike


def test_hugging_faces_debugger_names_the_module_and_says_when_it_cannot_read_a_model():
    buggy, _ = _pair("mlp-log_of_zero", "hf_overflow")
    assert "'backbone.0' (Linear)" in buggy.alarms["message"].iloc[0]
    transformer = execute(compose_run(["scenario=transformer-clean", "harness.steps=3"]),
                          [load_detector("hf_overflow")])
    # its abs().min() meets the attention's boolean mask: recorded once, the run goes on
    assert transformer.summary["detectors"]["hf_overflow"]["error"] == (
        "NotImplementedError: \"abs_cpu\" not implemented for 'Bool'")
    assert len(transformer.trace) == 3


def test_lightnings_spike_detection_judges_the_stored_trace_sealed():
    assert detector_class("lightning_spikes").sealed
    assert all(not detector_class(n).sealed for n in ("hf_overflow", "torch_grad_norm"))
    assert not any(detector_class(n).run_by_default for n in NUMERIC_TOOLS)


def test_a_tool_missing_from_its_library_says_why():
    """Lightning 2.6 no longer ships ``utilities.finite_checks``: the row says so."""
    try:
        from lightning.pytorch.utilities import finite_checks  # noqa: F401
    except ImportError:
        assert "finite_checks" in unavailable("lightning_finite")
    else:
        assert unavailable("lightning_finite") is None


def test_lightnings_spike_detection_sealed_gives_the_alarms_it_gave_live(tmp_path):
    """Scored from the stored trace in a confined job, as the tools board scores it, the
    adapter raises what it raised watching the run."""
    cfg = compose_run(["scenario=mlp-log_of_zero", "seed=0"])
    execute_and_store(cfg, tmp_path, "sweep", [load_detector("lightning_spikes")])
    [run] = list(traceset.stored_runs(tmp_path / "sweep"))
    [(replayed, statuses)] = score_runs([run], ["lightning_spikes"], [tmp_path / "sweep"])
    live = store.read_alarms(store.run_dir(tmp_path, "sweep", "mlp-log_of_zero", 0))
    assert len(live) == 1
    pd.testing.assert_frame_equal(replayed, live, check_dtype=False)
    assert statuses["lightning_spikes"]["error"] is None
