"""missing_activation: the hidden non-linearity is left out of the model."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_without_activation(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    # The mistake: no nn.ReLU() (the gpt's blocks: nn.GELU()) where the architecture has one.
    # nn.Identity() holds its place, so the forward is the one the model has with the activation
    # left out.
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.ReLU | nn.GELU):
                setattr(parent, name, nn.Identity())
    return model


class MissingActivation(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_without_activation)


BUG = MissingActivation(
    id="missing_activation",
    title="Hidden activation left out: stacked layers collapse to one linear map",
    category="model",
    taxonomy={
        "H.model.activation.missing_relu": "literal",
        "J.ACH": "partial: the activation is missing, not a wrong one",
        "J.LRM": ("partial: in PyTorch the activation is a module of its own, so leaving out "
                  "nn.ReLU() drops a layer; in Keras, where the study's faults come from, it is "
                  "an argument of the Dense or Conv layer, not a missing layer"),
    },
    honours_onset=False,
    symptom=("training and validation loss level off early, well above the clean run's; "
             "validation accuracy ends lower"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Without a non-linearity between them, Linear (or convolution and BatchNorm) "
                 "layers compose into a single affine map: however deep the network, it can only "
                 "draw linear decision boundaries on its input. Classes that are mixtures of "
                 "clusters, or spatial patterns, need curved boundaries, so the model underfits "
                 "and its loss plateaus high, with no error raised. In a transformer block the "
                 "feed-forward layer's two Linears collapse into one the same way; attention "
                 "still mixes tokens, so the language model learns, but with less to compute "
                 "each token's next word from."),
    buggy="""\
self.backbone = nn.Sequential(
    nn.Linear(in_features, hidden), nn.Dropout(dropout),
    nn.Linear(hidden, hidden), nn.Dropout(dropout),
)""",
    fixed="""\
self.backbone = nn.Sequential(
    nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(dropout),
    nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
)""",
    models=("mlp", "resnet", "gpt"),
    reproducers={"mlp": Delta(
        patch=(
            ("nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64, 64), nn.ReLU())",
             "nn.Linear(DIM, 64), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64, 64))"),
        ),
    ), "resnet": Delta(
        patch=(
            ("nn.BatchNorm2d(widths[0]), nn.ReLU(),",
             "nn.BatchNorm2d(widths[0]),"),
            ("out = F.relu(self.bn1(self.conv1(x)))",
             "out = self.bn1(self.conv1(x))"),
            ("return F.relu(self.bn2(self.conv2(out)) + self.skip(x))",
             "return self.bn2(self.conv2(out)) + self.skip(x)"),
        ),
    ), "gpt": Delta(
        patch=(("nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM)",
                "nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)"),),
    )},
    since="1.1",
)
