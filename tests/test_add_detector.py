"""Adding a built-in detector takes its file and one registration line: no Hydra config, no
list to extend. Proven with a throwaway detector registered as bugzoo's own distribution
registers its built-ins (one entry point of ``bugzoo.detectors``)."""

from __future__ import annotations

import contextlib
import io

import pytest

from bugzoo.cli import main
from bugzoo.config import compose_run
from bugzoo.detector_registry import DETECTORS, load_detector, select_detectors, shipped_detectors
from bugzoo.harness.runner import execute
from bugzoo.paths import CONF_DIR
from bugzoo.registry import OWN_DISTRIBUTION

THROWAWAY = '''"""``throwaway``: alarms when the training loss is not finite (a test's detector)."""

import math

from bugzoo import Alarm, Detector, Observation


class Throwaway(Detector):
    def observe(self, obs: Observation) -> list[Alarm]:
        if math.isfinite(obs.loss):
            return []
        return [self.alarm(obs.step, "loss_not_finite", "numerics", "the loss is not finite")]
'''


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The detector's file, and the one line that registers it, in bugzoo's distribution."""
    (tmp_path / "throwaway_detector.py").write_text(THROWAWAY)
    info = tmp_path / "bugzoo_bench-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {OWN_DISTRIBUTION}\n"
                                   "Version: 1.0.0\n")
    (info / "entry_points.txt").write_text(
        "[bugzoo.detectors]\nthrowaway = throwaway_detector:Throwaway\n")  # the one line
    monkeypatch.syspath_prepend(str(tmp_path))
    return "throwaway"


def test_a_new_built_in_detector_needs_its_file_and_one_line(throwaway):
    assert throwaway in DETECTORS.names() and throwaway in shipped_detectors()
    assert throwaway in select_detectors()  # a plain bench runs it
    assert not (CONF_DIR / "detector").exists()
    cfg = compose_run(["scenario=mlp-lr_too_high", "harness.steps=30",
                       f"detector=[{throwaway}]"])  # its Hydra config is made for it
    result = execute(cfg, [load_detector(name) for name in cfg.detector])
    assert result.summary["detectors"][throwaway]["alarms"] > 0
    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        assert main(["list", "detectors"]) == 0
    assert throwaway in listing.getvalue()
