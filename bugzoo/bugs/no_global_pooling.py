"""no_global_pooling: the CNN's head reads the flattened feature map, not its global average."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_without_global_pool(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    widths = self.cfg.model.params.widths
    side = self.data.train.x.shape[-1] // 2 ** (len(widths) - 1)  # one stride 2 per later stage
    # The mistake: no nn.AdaptiveAvgPool2d(1) before the Flatten; the head is sized for the
    # whole map (channels x height x width) so that the shapes agree
    model.backbone = nn.Sequential(*(m for m in model.backbone
                                     if not isinstance(m, nn.AdaptiveAvgPool2d)))
    model.head = nn.Linear(widths[-1] * side * side, model.head.out_features)
    with torch.no_grad():  # started small, as the clean builder starts every head
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()
    return model


class NoGlobalPooling(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_without_global_pool)


BUG = NoGlobalPooling(
    id="no_global_pooling",
    title="No global average pooling before the classifier head",
    category="model",
    taxonomy={
        "H.model.layers.missing_avg_pooling": "literal",
        # literal: the pooling layer is the missing layer (the head is resized with it, as a
        # user does to make the shapes agree)
        "J.LRM": "literal",
    },
    honours_onset=False,
    symptom=("training loss falls faster than the clean run's, to almost zero within a few "
             "epochs, while validation loss levels off several times higher: the model fits "
             "the training images better than it generalises"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Global average pooling makes the head read what patterns are present, "
                 "wherever they are. Flattening the feature map instead gives the head a weight "
                 "for every channel at every position: many times the parameters, and a stripe "
                 "or ring it learned in one place means nothing in another. The model must learn "
                 "each pattern at each position from fewer examples, so it generalises worse."),
    buggy="""\
stages += [nn.Flatten()]
self.backbone = nn.Sequential(*stages)
self.head = nn.Linear(widths[-1] * 8 * 8, num_classes)""",
    fixed="""\
stages += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
self.backbone = nn.Sequential(*stages)
self.head = nn.Linear(widths[-1], num_classes)""",
    models=("resnet",),
    inapplicable={"gpt": "pooling image feature maps: the causal LM has none"},
    since="1.1",
    reproducers={"resnet": Delta(
        patch=(("nn.AdaptiveAvgPool2d(1), nn.Flatten())", "nn.Flatten())"),
               ("self.head = nn.Linear(widths[1], CLASSES)",
                "self.head = nn.Linear(widths[1] * (SIZE // 2) ** 2, CLASSES)")),
        settings={"NOISE": 2.0},  # noisier pictures: the clean network stays short of 100%
    )},
)
