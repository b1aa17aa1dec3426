"""Real third-party debugging tools as optional detectors (``pip install '.[tools]'``)."""

from __future__ import annotations

import importlib.util
import shutil

import pytest
from bugzoo_detectors.cockpit_adapter import Cockpit

from bugzoo.config import compose_run
from bugzoo.detector import default_detectors, detector_names, unavailable
from bugzoo.harness.runner import execute
from bugzoo.telemetry import TIMING_COLUMNS

HAS_COCKPIT = Cockpit.available() is None
HAS_TRAINCHECK = importlib.util.find_spec("traincheck") is not None and all(
    shutil.which(f"traincheck-{verb}") for verb in ("collect", "infer", "check"))


def test_adapters_import_and_register_without_their_tools():
    assert "cockpit" in detector_names()
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


@pytest.mark.skipif(not HAS_TRAINCHECK, reason="TrainCheck not installed (extra: tools)")
def test_traincheck_offline_flags_missing_zero_grad_beyond_the_clean_control(tmp_path):
    from bugzoo_detectors.traincheck_adapter import run_offline

    table = run_offline(["mlp-missing_zero_grad"], tmp_path, steps=8, train_seeds=(0,))
    buggy = table.set_index("scenario").loc["mlp-missing_zero_grad"]
    assert buggy["flagged"]
    assert "zero_grad" in buggy["new_invariants"]  # the ordering step -> zero_grad is broken


@pytest.mark.skipif(not HAS_COCKPIT, reason="Cockpit/BackPACK not installed (extra: tools)")
def test_cockpit_stands_down_on_a_model_backpack_cannot_handle():
    detector = _cockpit()
    result = execute(compose_run(["scenario=transformer-clean", "harness.steps=3"]), [detector])
    assert "LayerNorm" in detector.stood_down
    assert result.summary["detectors"]["cockpit"]["error"] is None and result.alarms.empty
