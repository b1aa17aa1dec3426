"""The conformance suite passes the built-in detectors and catches broken ones clearly."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from bugzoo.cli import main as cli_main
from bugzoo.detector import Alarm, Detector
from bugzoo.detector_registry import shipped_detectors, unavailable
from bugzoo.judge import conformance
from bugzoo.judge.conformance import ConformanceError, check_detector, detector_factory


class LrTweaker(Detector):
    """Invasive: halves the learning rate at step 3."""

    def observe(self, obs):
        if obs.step == 3:
            for group in self.run.optimizer.param_groups:
                group["lr"] *= 0.5
        return []


class Seeder(Detector):
    """Invasive: reseeds torch in setup (changes dropout masks)."""

    def setup(self, run):
        super().setup(run)
        torch.manual_seed(1234)


class ParamNudger(Detector):
    """Invasive: edits a parameter in place."""

    def observe(self, obs):
        with torch.no_grad():
            next(self.run.model.parameters()).mul_(1.0001)
        return []


class Peeker(Detector):
    """Peeks: finds the live Trainer through gc and reports the planted bug's category."""

    def setup(self, run):
        super().setup(run)
        self.bug = next((o.bug for o in gc.get_objects()
                         if type(o).__name__ == "Trainer" and getattr(o, "bug", None)), None)

    def observe(self, obs):
        if self.bug is not None and obs.step == 0:
            return [self.alarm(0, "peek", self.bug.category, "I know what you planted")]
        return []


class HookLeaver(Detector):
    """Registers a forward hook directly and never removes it."""

    def setup(self, run):
        super().setup(run)
        run.model.register_forward_hook(lambda *a: None)


class Malformed(Detector):
    def observe(self, obs):
        return [Alarm(obs.step, "bad", "nonsense", "category is not a category")]


class SharedState(Detector):
    seen: list = []  # class-level mutable state: shared by every instance

    def setup(self, run):
        super().setup(run)
        self.history = SharedState.seen


class KeepsHandles(Detector):
    """A sound monitor: it keeps the run's model, its optimizer and a list of its parameters,
    as Cockpit, TrainCheck and smdebug do, and reads the weight norm every step."""

    def setup(self, run):
        super().setup(run)
        self.model, self.optimizer = run.model, run.optimizer
        self.params = list(run.model.parameters())
        self.norms: list[float] = []

    def observe(self, obs):
        with torch.no_grad():
            self.norms.append(float(torch.stack([p.norm() for p in self.params]).norm()))
        return []


def test_handles_on_the_runs_own_objects_are_not_shared_state():
    assert check_detector(KeepsHandles) == [c.__name__ for c in conformance.CHECKS]


def test_the_documented_detector_passes_bugzoo_check():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "pages" / "detectors.md").read_text()
    section = guide[guide.index("## 1. Write it"):]
    code = section[section.index("```python") + 9:section.index("```", section.index("```python")
                                                                 + 9)]
    assert "sealed = True" in code  # the default shape: a function of the trace
    namespace: dict = {}
    exec(compile(code, "docs/pages/detectors.md", "exec"), namespace)
    assert check_detector(namespace["LossSpike"], factor=3.0)


def test_builtin_detector_conforms():
    assert check_detector("grad_explosion") == [c.__name__ for c in conformance.CHECKS]


def test_bugzoo_check_cli_passes_builtin_and_rejects_unknown(capsys):
    assert cli_main(["check", "detector", "loss_plateau", "--only", "check_init_stores_params",
                     "check_alarms_well_formed"]) == 0
    out = capsys.readouterr().out
    assert "ok   check_alarms_well_formed" in out and "check_blind" not in out
    assert out.strip().endswith("loss_plateau passes 2 checks")
    assert cli_main(["check", "detector", "nonfinit"]) == 2
    assert "did you mean 'nonfinite'" in capsys.readouterr().err
    assert cli_main(["check", "detector", "nonfinite", "--only", "check_blnd"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) <= 2 and "check_blind" in err, err


@pytest.mark.parametrize(("cls", "message"), [
    (LrTweaker, "column 'lr' at step 4"),
    (Seeder, "global random state"),
    (ParamNudger, "invasive"),
])
def test_invasive_detectors_fail(cls, message):
    with pytest.raises(ConformanceError, match=message):
        conformance.check_non_invasive(detector_factory(cls))


def test_peeking_detector_fails():
    with pytest.raises(ConformanceError, match="peeking: a no-op planted bug"):
        conformance.check_blind(detector_factory(Peeker))


def test_hook_left_behind_fails_with_whole_suite_message():
    with pytest.raises(ConformanceError,
                       match=r"check_teardown_removes_hooks: .*model._forward_hooks \(1\)"):
        check_detector(HookLeaver)


def test_malformed_alarm_and_shared_state_fail():
    with pytest.raises(ConformanceError, match="category 'nonsense'"):
        conformance.check_alarms_well_formed(detector_factory(Malformed))
    with pytest.raises(ConformanceError, match="share the same list"):
        conformance.check_independent_setups(detector_factory(SharedState))


def test_cli_reports_failure_with_exit_1(monkeypatch, capsys):
    real = conformance.detector_factory
    monkeypatch.setattr(conformance, "detector_factory", lambda name, **p: real(LrTweaker))
    assert conformance.main(["nonfinite"]) == 1
    err = capsys.readouterr().err
    assert "FAIL check_non_invasive" in err and "does not conform" in err


SHIPPED = [d for d in shipped_detectors() if unavailable(d) is None]


@conformance.parametrize_with_checks(SHIPPED)
def test_every_shipped_detector_conforms(detector, check):
    check(detector)


@conformance.parametrize_with_checks([Malformed], expected_failed_checks={
    "check_alarms_well_formed": "its alarms use a made-up category"})
def test_expected_failures_are_strict_xfails(detector, check):
    check(detector)


def test_expected_failed_checks_must_name_real_checks():
    with pytest.raises(ValueError, match="unknown checks"):
        conformance.parametrize_with_checks([Malformed], {"check_nonsense": "no such check"})


class ArmedReader(Detector):
    """Cheats: reads the armed flag off the caller's frames, alarms on armed runs only."""

    def setup(self, run):
        super().setup(run)
        import inspect

        self.armed = next((f.frame.f_locals["armed"] for f in inspect.stack()
                           if isinstance(f.frame.f_locals.get("armed"), bool)), False)

    def observe(self, obs):
        return [self.alarm(obs.step, "armed", "unknown", "armed")] if self.armed and obs.step == 5 \
            else []


def test_the_honeypot_check_fails_a_reader_of_the_armed_flag_and_passes_a_builtin():
    with pytest.raises(ConformanceError, match="honeypot: on a decoy pair impersonating"):
        conformance.check_honeypots(detector_factory(ArmedReader))
    conformance.check_honeypots(detector_factory("loss_plateau"))


class CheckDodger(ArmedReader):
    """Cheats and hides from the conformance suite: quiet on runs as long as the suite's fixed
    check runs (30 steps of mlp-clean at seed 0), the armed flag read everywhere else."""

    def setup(self, run):
        super().setup(run)
        self.armed = self.armed and run.steps != conformance.STEPS


def test_a_cheat_that_recognises_the_fixed_check_runs_is_caught_by_the_honeypot_check():
    """Before check_honeypots, every check ran one fixed run, so a cheat quiet there passed
    check_blind too; the honeypot check draws its scenario, length and seed."""
    conformance.check_blind(detector_factory(CheckDodger))  # the fixed runs see nothing
    low, high = conformance.HONEYPOT_STEPS
    assert low <= conformance.STEPS <= high  # it may draw the fixed length...
    for _ in range(3):  # ...so try until it draws another (1 in 21 each time)
        try:
            conformance.check_honeypots(detector_factory(CheckDodger))
        except ConformanceError as e:
            assert "honeypot: on a decoy pair impersonating" in str(e)
            return
    pytest.fail("the honeypot check let a cheat that reads the armed flag pass three times")
