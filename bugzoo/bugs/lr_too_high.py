"""lr_too_high: the learning rate is set orders of magnitude too high (a typo'd exponent)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck


class LrTooHigh(Bug):
    def before_build(self, trainer) -> None:
        # The mistake lives in the configuration: lr is a typo'd value (1e3 written for 1e-3).
        trainer.cfg.optim.lr = float(trainer.cfg.bug.params.lr)


BUG = LrTooHigh(
    id="lr_too_high",
    title="Learning rate far too high",
    category="optim",
    taxonomy={
        "H.training.hparams.suboptimal_tuning": "partial: one hyperparameter",
        "H.training.hparams.suboptimal_lr": "literal",
        "D.lr": "literal",
        "A.exploding_gradient": "literal",
        "J.HLR": "literal",
    },
    honours_onset=False,
    symptom=("parameters blow up within a few dozen steps and the loss becomes inf/NaN"),
    check=SymptomCheck("nonfinite", "event"),
    explanation=("A learning rate several orders of magnitude too large (a sign slip in the "
                 "exponent is the classic) makes every update overshoot. With AdamW the "
                 "decoupled weight decay multiplies each weight by (1 - lr * wd) per step: once "
                 "lr * wd > 2 that factor is below -1, the weights grow geometrically and the "
                 "forward pass overflows to inf, then NaN."),
    buggy="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e3, weight_decay=0.01)  # meant 1e-3""",
    fixed="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)""",
    params={
        "lr": 1000.0,
    },
    reproducers=dict.fromkeys(("mlp", "lstm", "transformer", "resnet", "gpt"), Delta(
        patch=(
            ("lr=LR, weight_decay",
             "lr=1e3, weight_decay"),
        ),
    )),
    patches_only=False,  # it also edits the built run directly
)
