"""``overfit_probe``: can a copy of the model memorise one tiny batch?"""

from __future__ import annotations

import copy
import math

import torch
from bugzoo_detectors._hooks import strip_hooks
from torch.nn.parallel import DistributedDataParallel

from bugzoo import Alarm, Detector, Observation, RunView


class OverfitProbe(Detector):
    """Recipe: the single-batch overfit test (reference notes: "take 2-8 examples ... the model
    should overfit perfectly").

    At setup, a deep copy of the model and of the loss (hooks stripped) is trained with its own
    Adam on the first ``examples`` training rows, read from the split (the loader's generator is
    untouched), for up to ``steps`` steps. If the loss never falls below ``target`` x its first
    value (both measured above the loss's attainable minimum: 0 for cross-entropy, the entropy
    of the smoothed targets under label smoothing, which no model can go below), a ``model``
    alarm is raised at step 0; the probe stops as soon as it does (a sound
    model gets there in a few dozen steps). Non-invasive: the live model, optimizer and data are
    never touched and torch's RNG state is restored afterwards. It sees what is wrong in the
    model and loss as built; mistakes in the training loop or with a later onset are invisible.
    """

    def __init__(self, examples: int = 8, steps: int = 100, lr: float = 1e-2,
                 target: float = 0.25):
        self.examples, self.steps, self.lr, self.target = examples, steps, lr, target

    def setup(self, run: RunView) -> None:
        super().setup(run)
        floor = run.loss_floor
        first, best = self.probe(run, floor)
        if not best - floor < self.target * (first - floor):
            self.queue(self.alarm(0, "cannot_overfit", "model",
                                  f"a copy trained {self.steps} steps on {self.examples} examples "
                                  f"only went from loss {first:.3g} to {best:.3g}"))

    def probe(self, run: RunView, floor: float) -> tuple[float, float]:
        """First loss and lowest loss of the copy, trained until it beats the target."""
        split = run.train_loader.split
        rows = slice(0, self.examples)
        inputs = tuple(t.clone().to(run.device) for t in split.inputs(rows))
        y = split.y[rows].clone().to(run.device)
        # under DDP the copy is of the wrapped module: a DDP copy would all-reduce on its own
        live = run.model.module if isinstance(run.model, DistributedDataParallel) else run.model
        model = strip_hooks(copy.deepcopy(live)).train()
        loss_fn = strip_hooks(copy.deepcopy(run.loss_fn))
        optimizer = torch.optim.Adam(model.parameters(), lr=self.lr)
        devices = [run.device] if run.device.type == "cuda" else []
        losses = []
        # private work: another detector's global anomaly mode must neither slow it nor raise in it
        with torch.random.fork_rng(devices=devices), torch.autograd.set_detect_anomaly(False):
            for _ in range(self.steps):
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(*inputs).float(), y)
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
                if losses[-1] - floor < self.target * (losses[0] - floor):
                    break
        finite = [v for v in losses if math.isfinite(v)]
        return losses[0], min(finite, default=math.nan)

    def observe(self, obs: Observation) -> list[Alarm]:
        return self.flush()
