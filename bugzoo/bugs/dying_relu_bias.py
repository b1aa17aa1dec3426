"""dying_relu_bias: the biases feeding each ReLU are initialised to -1."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_with_negative_bias(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    with torch.no_grad():
        for m in model.backbone.modules():
            # the bias added just before each ReLU: a hidden Linear's, or a BatchNorm's shift
            # (beta) after a bias-free convolution
            if isinstance(m, nn.Linear | nn.BatchNorm2d):
                # The mistake: a negative constant (a gate's init, copied onto ReLU layers)
                nn.init.constant_(m.bias, -1.0)
    return model


class DyingReluBias(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_with_negative_bias)


BUG = DyingReluBias(
    id="dying_relu_bias",
    title="Hidden biases initialised to -1: most ReLUs dead from the start",
    category="model",
    taxonomy={
        "A.dying_relu": "literal",
        "H.model.type.wrong_weights_init": "literal",
        "J.WCI": "literal",
    },
    honours_onset=False,
    symptom=("the loss stays near log(C) longer than it should (a plain MLP never leaves it) "
             "and validation loss ends above the clean run's; most hidden units output zero "
             "for every input, and their gradients are zero"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("A ReLU passes a gradient only where its input is positive. With every bias at "
                 "-1 and pre-activations of order one or smaller, most units are negative for "
                 "almost every input: they output zero, get zero gradient, and their weights "
                 "never move to bring them back. The network trains on the few units that "
                 "happen to be alive. A negative bias init is right for a sigmoid gate (a "
                 "highway network's transform gate starts mostly closed); copied onto ReLU "
                 "layers it switches them off."),
    buggy="""\
for m in model.backbone.modules():
    if isinstance(m, nn.Linear):
        nn.init.constant_(m.bias, -1.0)     # as for the gates of a highway layer""",
    fixed="""\
for m in model.backbone.modules():
    if isinstance(m, nn.Linear):
        nn.init.zeros_(m.bias)     # or keep PyTorch's default: small, around zero""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("ReLU units initialised dead: the causal LM's MLP blocks use GELU, "
                          "which has no dead region")},
    reproducers={"mlp": Delta(
        patch=(
            ("model = MLP()\n",
             "model = MLP()\n"
             "for m in model.backbone.modules():\n"
             "    if isinstance(m, nn.Linear):\n"
             "        nn.init.constant_(m.bias, -1.0)\n"),
        ),
        settings={"SPREAD": 1.0},  # blobs near the origin: most ReLUs start below -1
    ), "resnet": Delta(
        patch=(
            ("model = ResNet(mean, std)\n",
             "model = ResNet(mean, std)\n"
             "for m in model.backbone.modules():\n"
             "    if isinstance(m, nn.BatchNorm2d):\n"
             "        nn.init.constant_(m.bias, -1.0)\n"),
        ),
    )},
    since="1.1",
)
