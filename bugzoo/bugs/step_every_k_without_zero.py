"""step_every_k_without_zero: hand-rolled accumulation that steps every k batches, never zeroes."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def zero_grad(self) -> None:
    return None  # the mistake: optimizer.zero_grad() is never called


def optimizer_step(self) -> None:
    every = int(self.cfg.bug.params.every)
    if (self.step + 1) % every == 0:
        self.optimizer.step()


class StepEveryKWithoutZero(Bug):
    def before_build(self, trainer) -> None:
        active = from_onset(trainer)
        patch_method(trainer, "zero_grad", zero_grad, active=active)
        patch_method(trainer, "optimizer_step", optimizer_step, active=active)


BUG = StepEveryKWithoutZero(
    id="step_every_k_without_zero",
    title="Optimizer steps every k batches but gradients are never zeroed",
    category="loop",
    taxonomy={
        "H.training.hparams.wrong_batching": "partial: an accumulation fault",
        "J.HBI": "partial: an accumulation fault",
    },
    symptom=("the updates follow a running sum of every gradient since the start: the loss "
             "oscillates and the validation loss ends above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("A hand-written gradient accumulation loop calls backward() every batch and "
                 "optimizer.step() every k batches, but forgets optimizer.zero_grad() after the "
                 "step. .grad then accumulates over the whole run instead of over k batches: "
                 "each update uses the sum of all past gradients, dominated by stale early ones."),
    buggy="""\
for i, (x, y) in enumerate(loader):
    loss_fn(model(x), y).backward()
    if (i + 1) % k == 0:
        optimizer.step()              # no optimizer.zero_grad()""",
    fixed="""\
for i, (x, y) in enumerate(loader):
    loss_fn(model(x), y).backward()
    if (i + 1) % k == 0:
        optimizer.step()
        optimizer.zero_grad()""",
    params={
        "every": 4,
    },
    reproducers=dict.fromkeys(("mlp", "lstm", "transformer", "resnet", "gpt"), Delta(
        patch=(("        optimizer.zero_grad()\n", ""),
               ("        optimizer.step()\n",
                "        if (step + 1) % 4 == 0:\n"
                "            optimizer.step()\n")),
    )),
)
