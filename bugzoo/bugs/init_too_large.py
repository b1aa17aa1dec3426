"""init_too_large: every Linear weight re-initialised with a fixed std far above a scaled init
(a deep plain MLP, the gpt)."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck


def reinit_linear(model: nn.Module, std: float) -> None:
    """``nn.init.normal_(w, 0, std)`` on every Linear weight (a fixed std, not fan-in scaled)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, std)


class FixedStdInit(Bug):
    """Re-initialise every Linear weight with ``bug.params.std`` (one plant, two bugs: the std
    of ``init_too_large`` and of ``init_too_small``)."""

    def after_build(self, trainer) -> None:
        reinit_linear(trainer.model, float(trainer.cfg.bug.params.std))


BUG = FixedStdInit(
    id="init_too_large",
    title="Weight initialisation std too large",
    category="model",
    taxonomy={
        "H.model.type.wrong_weights_init": "literal",
        "A.exploding_gradient": "literal",
        "J.WCI": "literal",
    },
    honours_onset=False,
    symptom=("activations grow by a constant factor per layer: the first loss is far above "
             "log(C) (orders of magnitude in a deep MLP), training is erratic and ends worse"),
    check=SymptomCheck("initial_loss", "higher"),
    explanation=("With std=1 instead of sqrt(2/fan_in) (He) each 128-wide ReLU layer multiplies "
                 "the activation scale by about sqrt(128/2)=8. Through eight layers logits reach "
                 "~1e7, the softmax saturates, the first losses are huge and gradients are "
                 "dominated by a few saturated samples. The gpt starts every Linear weight at "
                 "std 0.02; std 1 there also redraws its token embedding, which its output head "
                 "shares, so the first logits are far too large."),
    buggy="""\
for m in model.modules():
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 1.0)""",
    fixed="""\
for m in model.modules():
    if isinstance(m, nn.Linear):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")   # std = sqrt(2 / fan_in)""",
    models=("mlp", "gpt"),
    params={
        "std": 1.0,
    },
    reproducers={"mlp": Delta(
        patch=(
            ("model = MLP()\n",
             "model = MLP()\n"
             "for m in model.modules():\n"
             "    if isinstance(m, nn.Linear):\n"
             "        nn.init.normal_(m.weight, 0.0, 1.0)\n"),
        ),
    ), "gpt": Delta(
        patch=(  # the head is a Linear too, tied to the token embedding
            ("model = GPT()\n",
             "model = GPT()\n"
             "for m in model.modules():\n"
             "    if isinstance(m, nn.Linear):\n"
             "        nn.init.normal_(m.weight, 0.0, 1.0)\n"),
        ),
    )},
    patches_only=False,  # it also edits the built run directly
)
