"""scheduler_never_stepped: an LR scheduler is created but scheduler.step() is never called."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def scheduler_step(self) -> None:
    # The mistake: the loop never calls self.scheduler.step().
    return None


class SchedulerNeverStepped(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "scheduler_step", scheduler_step,
                     active=from_onset(trainer))


BUG = SchedulerNeverStepped(
    id="scheduler_never_stepped",
    title="LR scheduler never stepped",
    category="optim",
    taxonomy={
        "H.api.missing_api_call": "literal",
        "A.slow_convergence": "literal",
    },
    symptom=("the learning rate never follows its schedule (stuck at the warm-up's first value, or "
             "wherever it was when the run resumed): training crawls, or never anneals, and the "
             "validation loss ends higher"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("A scheduler only changes the learning rate when scheduler.step() is called. "
                 "If the call is forgotten (or sits in a branch that never runs), the optimizer "
                 "keeps the scheduler's initial learning rate: with linear warm-up that is the "
                 "tiny first warm-up value, so training crawls, and there is no final decay."),
    buggy="""\
scheduler = LambdaLR(optimizer, warmup_then_cosine)
for x, y in loader:
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()              # scheduler.step() missing""",
    fixed="""\
for x, y in loader:
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    optimizer.step()
    scheduler.step()""",
    reproducers=dict.fromkeys(("mlp", "lstm", "transformer", "resnet", "gpt"), Delta(
        patch=(
            ("        scheduler.step()\n",
             ""),
        ),
    )),
)
