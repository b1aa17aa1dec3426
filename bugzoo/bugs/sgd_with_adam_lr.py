"""sgd_with_adam_lr: the optimiser is switched to plain SGD, keeping the learning rate tuned for
AdamW."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def plain_sgd(self) -> torch.optim.Optimizer:
    # The mistake: AdamW swapped for SGD without momentum, but lr (and weight decay) left at the
    # values tuned for AdamW, whose per-parameter step is about lr whatever the gradient's size.
    o = self.cfg.optim
    return torch.optim.SGD(self.model.parameters(), lr=o.lr, weight_decay=o.weight_decay)


class SgdWithAdamLr(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_optimizer", plain_sgd)


BUG = SgdWithAdamLr(
    id="sgd_with_adam_lr",
    title="Plain SGD with the learning rate tuned for Adam",
    category="optim",
    taxonomy={
        "H.training.optimiser.wrong_optimiser": "literal",
        "J.OCH": "literal",
        "D.opt": "literal",
        "A.slow_convergence": "literal",
    },
    honours_onset=False,
    symptom=("nothing fails and the loss does fall, but far more slowly than it should: after the "
             "same number of steps validation loss is still well above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Adam-style optimisers divide each gradient by a running estimate of its scale, "
                 "so every parameter moves by roughly lr per step. Plain SGD moves by lr times "
                 "the raw gradient, which for a typical network is orders of magnitude smaller "
                 "than 1, and without momentum nothing accumulates consistent directions. A "
                 "learning rate tuned for AdamW is therefore far too small for SGD: training "
                 "crawls, and a fixed budget of steps ends underfitted."),
    buggy="""\
# was: torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, weight_decay=0.01)""",
    fixed="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
# or, for SGD, retune: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)""",
    models=("mlp", "transformer", "gpt"),
    reproducers=dict.fromkeys(("mlp", "transformer", "gpt"), Delta(
        patch=(
            ("torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)",
             "torch.optim.SGD(model.parameters(), lr=LR, weight_decay=0.01)"),
        ),
    )),
    since="1.1",
)
