"""``lightning_finite``: Lightning's ``detect_nan_parameters`` (``utilities.finite_checks``)
used as a detector."""

from __future__ import annotations

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation
from bugzoo.tools import import_failure


class LightningFinite(Detector):
    """Tool: ``lightning.pytorch.utilities.finite_checks.detect_nan_parameters`` after every
    optimizer step: a ``ValueError`` naming the first parameter that holds a NaN or an
    infinity. Here the error is the alarm and the run goes on. It reads the live parameters in
    an optimizer step post-hook, so it watches live.

    Needs ``lightning`` (``pip install -c constraints.txt 'bugzoo-bench[lightning]'``)."""

    role = "tool"
    run_by_default = False  # on the tools board (results/tools.md), not yet the full one
    live_reason = "an optimizer step post-hook reads the live parameters"

    @staticmethod
    def available() -> str | None:
        return import_failure("lightning.pytorch.utilities.finite_checks", "needs lightning")

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.fired = 0, False
        self.hook(run.optimizer.register_step_post_hook, self._after_step)

    def _after_step(self, *_) -> None:
        from lightning.pytorch.utilities.finite_checks import detect_nan_parameters  # optional

        if self.fired:
            return
        try:
            detect_nan_parameters(self.run.model)
        except ValueError as e:
            self.fired = True
            self.queue(self.alarm(self.step, "nonfinite_parameter", "numerics",
                                  f"Lightning: {str(e).splitlines()[0]}"))

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
