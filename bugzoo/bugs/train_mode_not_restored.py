"""train_mode_not_restored: evaluation switches to eval mode and never switches back."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def leave_eval(self) -> None:
    # The mistake: validation ends without self.model.train(), so dropout and BatchNorm stay in
    # eval mode for every training step after the first evaluation.
    pass


class TrainModeNotRestored(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "leave_eval", leave_eval, active=from_onset(trainer))


BUG = TrainModeNotRestored(
    id="train_mode_not_restored",
    title="model.train() never called again after the first evaluation",
    category="loop",
    taxonomy={
        "H.api.missing_api_call": "literal",
    },
    symptom=("after the first evaluation every training step runs in eval mode: dropout stops "
             "regularising and BatchNorm trains on frozen running statistics; where that matters "
             "the validation loss ends higher"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("model.eval() is a persistent switch. A validation routine that calls it but "
                 "never calls model.train() afterwards leaves the model in eval mode for every "
                 "later training step: dropout stops regularising and BatchNorm stops using and "
                 "updating batch statistics. Nothing errors; the loss curve just changes "
                 "character after the first evaluation."),
    buggy="""\
def validate(model, loader):
    model.eval()
    with torch.no_grad():
        ...
    # returns with the model still in eval mode

for step, (x, y) in enumerate(train_loader):
    loss = loss_fn(model(x), y)   # after the first validate(): dropout off, BN frozen
    ...
    if step % eval_every == 0:
        validate(model, val_loader)""",
    fixed="""\
def validate(model, loader):
    model.eval()
    with torch.no_grad():
        ...
    model.train()                 # restore training mode""",
    models=("mlp", "transformer", "resnet"),
    inapplicable={"gpt": ("the causal LM has no dropout or batch norm on its defaults, so a "
                          "model left in eval mode trains the same")},
    onset_note="it takes effect after the first evaluation",
    reproducers={model: Delta(
        patch=(
            ("    model.train()\n    return result",
             "    return result"),
        ),
        # the resnet: batch norm in training mode renormalises every layer whatever the
        # weights do, which makes a large learning rate safe; frozen at the running statistics
        # of step 50 it is a fixed affine map, and the network is an unnormalised one that
        # large steps throw off those statistics. Noisier pictures keep the gradients (and the
        # steps) coming after the clean task would have been fitted
        settings={"NOISE": 2.0, "LR": 3e-2} if model == "resnet" else {},
    ) for model in ("mlp", "transformer", "resnet")},
)
