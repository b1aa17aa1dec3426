"""linear_in_features_wrong: a Linear layer's in_features disagrees with what reaches it."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_first_layer_hidden_wide(self) -> nn.Module:
    """mlp: the first hidden layer is built as if its input were a hidden layer's."""
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    hidden = model.backbone[0].out_features
    model.backbone[0] = nn.Linear(hidden, hidden)  # The mistake: in_features=hidden, not 16
    return model


def build_head_for_first_stage(self) -> nn.Module:
    """resnet: the head is built for the first stage's width, not the last one's."""
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    widths = self.cfg.model.params.widths
    model.head = nn.Linear(widths[0], model.head.out_features)  # The mistake: widths[0]
    with torch.no_grad():  # started small, as the clean builder starts every head
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()
    return model


def build_feed_forward_out_for_model_width(self) -> nn.Module:
    """gpt: each block's feed-forward output layer is built for the model's width, not the
    feed-forward hidden width (twice as wide) that reaches it."""
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    for block in model.backbone.layers:
        dim = block.mlp[0].in_features
        block.mlp[2] = nn.Linear(dim, dim)  # The mistake: in_features=dim, not 2 * dim
    return model


BUILDERS = {"mlp": build_first_layer_hidden_wide, "resnet": build_head_for_first_stage,
            "gpt": build_feed_forward_out_for_model_width}


class LinearInFeaturesWrong(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", BUILDERS[trainer.cfg.model.name])


BUG = LinearInFeaturesWrong(
    id="linear_in_features_wrong",
    title="Linear layer built with the wrong in_features",
    category="model",
    taxonomy={
        "H.model.layer_props.wrong_linear_input_size": "literal",
        "H.model.layer_props.dimension_mismatch": "literal",
        "H.tensors.shape.mismatch": "literal",
        "J.LIS": "literal",
    },
    honours_onset=False,
    symptom=("the first forward pass raises RuntimeError: mat1 and mat2 shapes cannot be "
             "multiplied"),
    check=SymptomCheck("crashed", "event"),
    explanation=("nn.Linear(in_features, out_features) holds a weight of shape [out, in] and "
                 "multiplies it with whatever arrives; it does not infer the input width as "
                 "Keras' Dense does. A width typed from the wrong variable (the hidden size for "
                 "the input layer, the first stage's channels for the head of a CNN, the model "
                 "width for a transformer block's feed-forward output layer) builds fine and "
                 "fails at the first batch."),
    buggy="""\
layers = []
for _ in range(depth):
    layers += [nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout)]""",
    fixed="""\
layers, width = [], in_features
for _ in range(depth):
    layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
    width = hidden""",
    models=("mlp", "resnet", "gpt"),
    loud=True,
    # no export delta: the reproducer's buggy script would stop at its traceback, before the
    # SYMPTOM line its summary prints (which has no `crashed` field)
    since="1.1",
)
