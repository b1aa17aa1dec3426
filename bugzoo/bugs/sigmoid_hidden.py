"""sigmoid_hidden: the hidden layers use sigmoid where ReLU belongs."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_with_sigmoid(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    # The mistake: every hidden activation is nn.Sigmoid() where the architecture has nn.ReLU()
    # (the gpt's blocks: nn.GELU()).
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.ReLU | nn.GELU):
                setattr(parent, name, nn.Sigmoid())
    return model


class SigmoidHidden(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_with_sigmoid)


BUG = SigmoidHidden(
    id="sigmoid_hidden",
    title="Sigmoid hidden activations instead of ReLU",
    category="model",
    taxonomy={
        "H.model.activation.wrong_type": "literal",
        "J.ACH": "literal",
        # measured on mlp-sigmoid_hidden (8 layers), seed 0: the first layer's weight gradient is
        # 2e-8 at step 0 and 9e-12 at step 100 (clean: 1e-4 and 0.8), about 7x smaller per layer
        # towards the input; in the resnet BatchNorm and the shortcuts keep it within 2-5x
        "A.vanishing_gradient": "literal",
    },
    honours_onset=False,
    symptom=("the loss falls more slowly than it should (a deep MLP's stays at log(C) for "
             "the whole run) and levels off high; the early layers' gradients are orders of "
             "magnitude smaller than the last ones'; validation accuracy ends below the clean "
             "run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A sigmoid's derivative is at most 1/4 and its outputs are all positive and "
                 "centred near 1/2, so each hidden layer shrinks the gradient on its way back "
                 "and shifts the next layer's inputs off zero. Stacked deep, the early layers "
                 "learn far more slowly than with ReLU, whose derivative is 1 wherever a unit is "
                 "active; the network ends the same budget of steps less accurate."),
    buggy="""\
for _ in range(depth):
    layers += [nn.Linear(width, hidden), nn.Sigmoid(), nn.Dropout(dropout)]
    width = hidden""",
    fixed="""\
for _ in range(depth):
    layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
    width = hidden""",
    models=("mlp", "resnet", "gpt"),
    reproducers={"mlp": Delta(
        patch=(
            ("nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64, 64), nn.ReLU())",
             "nn.Linear(DIM, 64), nn.Sigmoid(), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64, 64), nn.Sigmoid())"),
        ),
    ), "resnet": Delta(
        patch=(
            ("nn.BatchNorm2d(widths[0]), nn.ReLU(),",
             "nn.BatchNorm2d(widths[0]), nn.Sigmoid(),"),
            ("out = F.relu(self.bn1(self.conv1(x)))",
             "out = torch.sigmoid(self.bn1(self.conv1(x)))"),
            ("return F.relu(self.bn2(self.conv2(out)) + self.skip(x))",
             "return torch.sigmoid(self.bn2(self.conv2(out)) + self.skip(x))"),
        ),
        settings={"NOISE": 2.0},  # noisier pictures: the clean network stays short of 100%
    ), "gpt": Delta(
        patch=(("nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM)",
                "nn.Linear(DIM, 4 * DIM), nn.Sigmoid(), nn.Linear(4 * DIM, DIM)"),),
    )},
    since="1.1",
)
