"""A detector's parameters from the command line: the form users try first works on ``bugzoo
run``, and every value is checked against the range its detector declares."""

from __future__ import annotations

import contextlib
import inspect
import io

import pytest
import yaml

from bugzoo import Detector
from bugzoo import detector_registry as registry
from bugzoo.cli import main
from bugzoo.detector_registry import detector_class, parameter_ranges, shipped_detectors
from bugzoo.errors import UsageError


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue().strip()


def test_a_detector_parameter_on_run_needs_no_plus(tmp_path):
    code, err = run_cli(["run", "scenario=mlp-clean", "detector=[loss_plateau]",
                         "detector.loss_plateau.window=3", "harness.steps=5",
                         f"harness.out_dir={tmp_path}"])
    assert code == 0, err
    config = yaml.safe_load((tmp_path / "single" / "mlp-clean" / "seed0" / "config.yaml")
                            .read_text())
    assert config["detector"] == {"loss_plateau": {"window": 3}}


@pytest.mark.parametrize(("argv", "says"), [
    (["check", "detector", "loss_plateau", "window=-1"], "window must be at least 1, got -1"),
    (["check", "detector", "loss_plateau", "high_frac=1.5"], "high_frac must be between 0 and 1, got 1.5"),
    (["run", "scenario=mlp-clean", "detector.loss_plateau.window=0"],
     "window must be at least 1, got 0"),
    (["run", "scenario=mlp-clean", "detector.loss_plateu.window=3"],
     "did you mean 'loss_plateau'?"),
    (["run", "scenario=mlp-clean", "detector.loss_plateau.windw=3"], "did you mean 'window'?"),
])
def test_a_value_outside_its_declared_range_is_a_one_line_error(argv, says, tmp_path):
    code, err = run_cli([*argv, f"harness.out_dir={tmp_path}"] if argv[0] == "run" else argv)
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("name", shipped_detectors())
def test_every_number_a_shipped_detector_takes_has_a_range_that_holds_its_default(name):
    cls = detector_class(name)
    ranges = parameter_ranges(name)
    numbers = {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()
               if p.annotation in ("int", "float", int, float) and p.name != "seed"}
    assert set(ranges) == set(numbers), f"{name}: declare a range for each number it takes"
    for key, (low, high) in ranges.items():
        assert (low is None or numbers[key] >= low) and (high is None or numbers[key] <= high)


def test_a_plugin_declares_its_ranges_on_its_class(monkeypatch):
    class Spiky(Detector):
        parameter_ranges = {"factor": (1, None)}

        def __init__(self, factor: float = 5.0):
            self.factor = factor

    monkeypatch.setattr(registry, "detector_class", lambda name: Spiky)
    monkeypatch.setattr(registry.DETECTORS, "is_own", lambda name: False)
    assert registry.user_params("spiky", {"factor": "2"}) == {"factor": 2.0}
    with pytest.raises(UsageError, match="detector spiky: factor must be at least 1, got 0.5"):
        registry.user_params("spiky", {"factor": "0.5"})


def test_a_multirun_sweeps_a_detector_parameter_value_by_value():
    from bugzoo.harness.app import with_detector_params

    assert with_detector_params(["detector.loss_plateau.window=10,20", "seed=0,1"]) == [
        "+detector.loss_plateau.window=10,20", "seed=0,1"]
    assert with_detector_params(["detector.loss_plateau.window=range(5,50,5)"]) == [
        "+detector.loss_plateau.window=range(5,50,5)"]  # Hydra's own sweep, left to Hydra
    with pytest.raises(UsageError, match="window must be at least 1, got 0"):
        with_detector_params(["detector.loss_plateau.window=10,0"])
