"""``lightning_spikes``: Lightning's ``SpikeDetection`` callback used as a detector."""

from __future__ import annotations

import torch

from bugzoo.detector import Alarm, Detector
from bugzoo.telemetry import Observation
from bugzoo.tools import import_failure
from bugzoo.trace import RunFacts


class _OneProcess:
    """The few parts of a Fabric that ``SpikeDetection`` asks for, for one process on the CPU.
    Its rank is not 0, because rank 0 also writes the batches to skip on resuming to a file,
    and a run judged sealed may write no file (nor is it ever resumed)."""

    global_rank = 1

    class strategy:  # noqa: N801 - named as Fabric's attribute
        root_device = torch.device("cpu")

        @staticmethod
        def barrier() -> None:
            return None

        @staticmethod
        def reduce_boolean_decision(decision: bool, all: bool = True) -> bool:  # noqa: A002
            return decision


class LightningSpikes(Detector):
    """Tool: ``lightning.fabric.utilities.spike.SpikeDetection`` on its defaults (a running mean
    of the last 10 losses; a loss more than twice that mean above it, or a non-finite loss, is
    a spike), fed each step's training loss as Fabric would feed it. Lightning stops training
    with a ``TrainingSpikeException``; here the exception is the alarm, at its step, and the
    run goes on. It reads the loss alone, so it is sealed: it judges the stored trace.

    Needs ``lightning`` and ``torchmetrics`` (``pip install -c constraints.txt
    'bugzoo-bench[lightning]'``)."""

    role = "tool"
    run_by_default = False  # on the tools board (results/tools.md), not yet the full one
    sealed = True

    @staticmethod
    def available() -> str | None:
        return import_failure("lightning.fabric.utilities.spike",
                              "needs lightning with torchmetrics")

    def setup(self, run: RunFacts) -> None:
        from lightning.fabric.utilities.spike import SpikeDetection  # only once a run starts

        super().setup(run)
        self.spikes = SpikeDetection()
        self.fabric, self.fired = _OneProcess(), False

    def observe(self, obs: Observation) -> list[Alarm]:
        from lightning.fabric.utilities.spike import TrainingSpikeException  # loaded by setup

        if self.fired:
            return []
        try:
            self.spikes.on_train_batch_end(self.fabric, torch.tensor(obs.loss), None, obs.step)
        except TrainingSpikeException as e:
            self.fired = True
            return [self.alarm(obs.step, "loss_spike", "unknown", f"Lightning: {e}")]
        return []
