"""scheduler_per_microbatch: with gradient accumulation, the scheduler steps every micro-batch."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


class SchedulerPerMicrobatch(Bug):
    def before_build(self, trainer) -> None:
        optimizer_step = trainer.optimizer_step

        def optimizer_step_after_micro_batch_schedule(self) -> None:
            # The mistake: scheduler.step() sits in the micro-batch loop, outside the `if` that
            # steps the optimizer, so the schedule advances on each of the k micro-batches of
            # a step: k - 1 times before the optimizer steps, then at its usual place after.
            if self.scheduler is not None:
                for _ in range(int(self.cfg.optim.accumulate) - 1):
                    self.scheduler.step()
            optimizer_step()

        patch_method(trainer, "optimizer_step", optimizer_step_after_micro_batch_schedule,
                     active=from_onset(trainer))


BUG = SchedulerPerMicrobatch(
    id="scheduler_per_microbatch",
    title="LR scheduler stepped on every micro-batch under gradient accumulation",
    category="optim",
    taxonomy={
        "H.training.hparams.wrong_batching": "partial: an accumulation fault",
        "H.api.wrong_api_usage": "literal",
        "J.HBI": "partial: an accumulation fault",
        "J.APW": "literal",
    },
    symptom=("the schedule runs `accumulate` times too fast: the learning rate reaches zero a "
             "quarter of the way through and learning stops there; the validation loss ends higher"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Schedules are defined in optimizer steps. With gradient accumulation over k "
                 "micro-batches, calling scheduler.step() inside the micro-batch loop advances "
                 "the schedule k times per optimizer step. A cosine schedule sized for the run "
                 "finishes after 1/k of it; the rest of training happens at (near) zero "
                 "learning rate."),
    buggy="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / k).backward()
    if (i + 1) % k == 0:
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()                      # outside the `if`: every micro-batch""",
    fixed="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / k).backward()
    if (i + 1) % k == 0:
        optimizer.step()
        scheduler.step()                  # once per optimizer step
        optimizer.zero_grad()""",
    reproducers={model: SetupDelta(
        setup=(
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "ACCUMULATE = 4  # micro-batches per optimizer step\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            (f"        loss = loss_fn(model({inputs}), yb)\n"
             "        loss.backward()\n",
             "        for part in torch.arange(BATCH).chunk(ACCUMULATE):  # gradient accumulation\n"
             f"            loss = loss_fn(model({parts}), yb[part])\n"
             "            (loss / ACCUMULATE).backward()\n"),
        ),
        patch=(
            ("            (loss / ACCUMULATE).backward()\n",
             "            (loss / ACCUMULATE).backward()\n"
             "            scheduler.step()\n"),
            ("        optimizer.step()\n"
             "        scheduler.step()\n",
             "        optimizer.step()\n"),
        ),
        settings=settings,
    ) for model, inputs, parts, settings in (
        ("mlp", "xb", "xb[part]", {"SPREAD": 1.0}),  # overlapping blobs: a loss floor above 0
        *((model, "*inputs", "*(t[part] for t in inputs)", {})
          for model in ("lstm", "transformer", "resnet", "gpt")))},
)
