"""``anomaly``: PyTorch's own ``torch.autograd.detect_anomaly`` used as a detector."""

from __future__ import annotations

import re
import warnings

import torch

from bugzoo import Alarm, Detector, Observation, RunView

ORIGIN = re.compile(r"Error detected in (\w+)")


class AnomalyMode(Detector):
    """Recipe: ``torch.autograd.set_detect_anomaly(True)`` for one debug run (reference notes).

    Anomaly mode records the forward traceback of every autograd node and checks each backward
    output for NaN. When a backward op returns NaN, PyTorch warns "Error detected in <Op>" with
    the forward traceback and raises a RuntimeError. The detector captures that warning (it
    wraps ``warnings.showwarning`` and lets that message through any "ignore" filter, both
    restored at teardown) and returns a ``numerics`` alarm naming the backward op —
    at teardown when the error ended the run.

    Invasive in outcome and timing only: values are unchanged, but a NaN gradient that a plain
    run survives becomes a crash, and every forward and backward pays for the recorded
    tracebacks (2-9x the step time here, most on the LSTM; ``results/perf/overhead.md``).
    Hence ``exclusive``: a sweep gives it runs of its own, so its crash cannot cut short what
    the other detectors would have seen. Those runs doubled the default sweep and took most of
    its time while catching nothing the built-ins missed (``results/leaderboard.md``), so it
    runs only when named: ``bugzoo bench --detectors anomaly``.
    """

    role = "tool"
    exclusive = True
    run_by_default = False

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        self.was_enabled = torch.is_anomaly_enabled()
        self.was_check_nan = torch.is_anomaly_check_nan_enabled()
        self.warning_state = warnings.catch_warnings()  # restores filters and showwarning
        self.warning_state.__enter__()
        warnings.filterwarnings("always", message="Error detected in")
        self.original_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        torch.autograd.set_detect_anomaly(True, check_nan=True)

    def _showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:
        match = ORIGIN.search(str(message))
        if match and not self.fired:
            self.fired = True
            self.queue(self.alarm(self.step, "anomaly_backward_nan", "numerics",
                                  f"autograd anomaly: {match.group(1)} produced NaN in backward"))
        self.original_showwarning(message, category, filename, lineno, file, line)

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()

    def teardown(self) -> list[Alarm]:
        if hasattr(self, "warning_state"):
            torch.autograd.set_detect_anomaly(self.was_enabled, check_nan=self.was_check_nan)
            self.warning_state.__exit__(None, None, None)
            del self.warning_state
        return super().teardown()
