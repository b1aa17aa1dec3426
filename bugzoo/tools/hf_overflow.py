"""``hf_overflow``: Hugging Face's ``DebugUnderflowOverflow`` (``debug="underflow_overflow"``)
used as a detector."""

from __future__ import annotations

import contextlib
import io

from torch import nn

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation
from bugzoo.tools import import_failure


class HFOverflow(Detector):
    """Tool: ``transformers.debug_utils.DebugUnderflowOverflow``, what ``TrainingArguments(
    debug="underflow_overflow")`` turns on, on its defaults. A forward hook on every module
    reads the absolute minimum and maximum of its weights, inputs and outputs, and at the first
    inf or NaN raises a ``ValueError`` that stops training, after printing the last 21 frames.
    Here that error is the alarm, naming the module and what it printed, and the hooks come off
    so the run goes on. The hooks see the model itself, so it watches live."""

    role = "tool"
    run_by_default = False  # on the tools board (results/tools.md), not yet the full one
    live_reason = "forward hooks on every module read its weights, inputs and outputs"

    @staticmethod
    def available() -> str | None:
        return import_failure("transformers.debug_utils", "needs transformers")

    def setup(self, run: RunView) -> None:
        from transformers.debug_utils import DebugUnderflowOverflow  # only once a run starts

        super().setup(run)
        detector = self

        class Hooked(DebugUnderflowOverflow):
            """Its hooks registered through the detector (so they are timed and removed), and
            the frames it would print kept as the alarm's message."""

            def _register_forward_hook(self, module: nn.Module) -> None:
                detector.hook(module.register_forward_hook, detector._forward)

            def dump_saved_frames(self) -> None:
                self.frames = []  # the frames it would print: the alarm names the module

        self.step, self.fired = 0, False
        self.said = io.StringIO()  # what it prints, only as it finds a value out of range
        self.debugger = Hooked(run.model)

    def _forward(self, module: nn.Module, inputs, output) -> None:
        if self.fired:
            return
        try:
            with contextlib.redirect_stdout(self.said):
                self.debugger.forward_hook(module, inputs, output)
        except ValueError as e:
            if "inf/nan detected" not in str(e):
                raise
            self.fired = True
            name = self.debugger.module_names.get(module) or "<model>"
            found = "; ".join(self.said.getvalue().split("\n")[:3]).strip("; ")
            self.queue(self.alarm(self.step, "inf_nan_activation", "numerics",
                                  f"Hugging Face's underflow/overflow debugger: inf/nan in the "
                                  f"forward pass of '{name}' ({type(module).__name__}): {found}"))
            self._stand_down()
        except Exception:
            self._stand_down()  # it cannot read this model: recorded once, as the run's error
            raise

    def _stand_down(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
