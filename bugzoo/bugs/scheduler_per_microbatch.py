"""scheduler_per_microbatch: with gradient accumulation, the scheduler steps every micro-batch."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Symptom, patch_method


def train_step(self) -> torch.Tensor:
    accumulate = int(self.cfg.optim.accumulate)
    self.zero_grad()
    total = torch.zeros((), device=self.device)
    for _ in range(accumulate):
        batch = self.next_batch()
        with self.autocast():
            loss = self.compute_loss(self.forward(batch), batch.y) / accumulate
        self.backward(loss)
        total += loss.detach().float()
        if self.scheduler is not None:
            self.scheduler.step()  # the mistake: once per micro-batch, not per optimizer step
    return total


def scheduler_step(self) -> None:
    return None  # the per-step call moved into the micro-batch loop above


class SchedulerPerMicrobatch(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "train_step", train_step)
        patch_method(trainer, "scheduler_step", scheduler_step)


BUG = SchedulerPerMicrobatch(
    id="scheduler_per_microbatch",
    title="LR scheduler stepped on every micro-batch under gradient accumulation",
    category="optim",
    symptom=Symptom("mean_lr", "lower",
                    "the schedule runs `accumulate` times too fast: warm-up ends early, the "
                    "learning rate reaches zero a quarter of the way through and stays there"),
    explanation=("Schedules are defined in optimizer steps. With gradient accumulation over k "
                 "micro-batches, calling scheduler.step() inside the micro-batch loop advances "
                 "the schedule k times per optimizer step. A cosine schedule sized for the run "
                 "finishes after 1/k of it; the rest of training happens at (near) zero "
                 "learning rate."),
    buggy="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / k).backward()
    scheduler.step()                      # every micro-batch
    if (i + 1) % k == 0:
        optimizer.step()
        optimizer.zero_grad()""",
    fixed="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / k).backward()
    if (i + 1) % k == 0:
        optimizer.step()
        scheduler.step()                  # once per optimizer step
        optimizer.zero_grad()""",
)
