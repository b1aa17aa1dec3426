"""missing_norm_layer: the model's normalisation layers are left out."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_without_norms(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    # The mistake: no BatchNorm2d / LayerNorm where the architecture has one. nn.Identity()
    # holds its place, so the forward is the one the model has with the layer left out.
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.BatchNorm2d | nn.LayerNorm):
                setattr(parent, name, nn.Identity())
    return model


class MissingNormLayer(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_without_norms)


BUG = MissingNormLayer(
    id="missing_norm_layer",
    title="Normalisation layers left out (no BatchNorm / LayerNorm)",
    category="model",
    taxonomy={
        "H.model.layers.missing_normalisation": "literal",
        "J.LRM": "literal",
    },
    honours_onset=False,
    symptom=("validation loss levels off above the clean run's: the CNN's loss starts falling "
             "later, the transformer's falls as fast at first (faster, even) and then stalls, "
             "the causal LM's falls more slowly from the first steps"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("BatchNorm (in a CNN) and LayerNorm (in a pre-norm transformer) keep each "
                 "layer's inputs at a steady scale, so one learning rate suits every layer "
                 "and the residual sum does not grow with depth. Without them activations drift "
                 "in scale as the weights change, the same learning rate is too large for some "
                 "layers and too small for others, and training converges more slowly, to a "
                 "worse point. Early on, before the scales drift, the difference can be small "
                 "or even favour the model without them."),
    buggy="""\
self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)

def forward(self, x):
    out = self.relu(self.conv1(x))
    return self.relu(self.conv2(out) + self.shortcut(x))""",
    fixed="""\
self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
self.bn1 = nn.BatchNorm2d(cout)
self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
self.bn2 = nn.BatchNorm2d(cout)

def forward(self, x):
    out = self.relu(self.bn1(self.conv1(x)))
    return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))""",
    models=("resnet", "transformer", "gpt"),
    since="1.1",
    reproducers={"resnet": Delta(
        patch=(("nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)",
                "nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.Identity()"),
               ("nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)",
                "nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.Identity()"),
               ("nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)",
                "nn.Conv2d(cin, cout, 1, stride, bias=False), nn.Identity()"),
               ("nn.BatchNorm2d(widths[0]), nn.ReLU()", "nn.Identity(), nn.ReLU()")),
        settings={"NOISE": 2.0},  # noisier pictures: the clean network stays short of 100%
    ), "transformer": Delta(
        patch=(("nn.LayerNorm(DIM), SelfAttention(), nn.LayerNorm(DIM)",
                "nn.Identity(), SelfAttention(), nn.Identity()"),
               ("self.norm = nn.LayerNorm(DIM)", "self.norm = nn.Identity()")),
        # three times the learning rate: LayerNorm hands every sublayer a unit-scale input
        # however far the residual stream grows, which is what makes large steps safe (the
        # clean encoder ends better at this rate); without it the stream and the attention
        # logits grow with the steps, while on the default rate both encoders end alike
        settings={"LR": 3e-2},
    ), "gpt": Delta(
        patch=(("nn.LayerNorm(DIM), CausalAttention(), nn.LayerNorm(DIM)",
                "nn.Identity(), CausalAttention(), nn.Identity()"),
               ("self.norm = nn.LayerNorm(DIM)", "self.norm = nn.Identity()")),
    )},
)
