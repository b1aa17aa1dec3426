"""pooling_too_aggressive: a 4x4 max-pool after the CNN's stem, on 16x16 images."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_with_early_pool(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    stem, stages = list(model.backbone)[:3], list(model.backbone)[3:]  # conv, BatchNorm, ReLU
    # The mistake: an ImageNet-style 4x downsampling right after the stem, on 16x16 inputs
    model.backbone = nn.Sequential(*stem, nn.MaxPool2d(4), *stages)
    return model


class PoolingTooAggressive(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_with_early_pool)


BUG = PoolingTooAggressive(
    id="pooling_too_aggressive",
    title="Max-pooling too aggressive for small images",
    category="model",
    taxonomy={
        "H.model.layer_props.wrong_pooling": "literal",
    },
    honours_onset=False,
    symptom=("the network trains without error, and faster per step, but its validation loss "
             "levels off about twice the clean run's; accuracy ends slightly lower"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("An ImageNet ResNet shrinks its 224-pixel input fourfold in the stem (a strided "
                 "7x7 convolution, then a strided max-pool) before any residual stage. Copied "
                 "onto 16x16 images, a 4x4 max-pool leaves the residual stages a 4x4 map: "
                 "stripes a few pixels apart, checkers and thin rings are averaged away or "
                 "aliased before any layer can tell them apart."),
    buggy="""\
stages = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
          nn.BatchNorm2d(widths[0]), nn.ReLU(),
          nn.MaxPool2d(4)]                    # as in the ImageNet model""",
    fixed="""\
stages = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
          nn.BatchNorm2d(widths[0]), nn.ReLU()]""",
    models=("resnet",),
    inapplicable={"gpt": "max-pooling small images: the causal LM has no pooling"},
    since="1.1",
    reproducers={"resnet": Delta(
        patch=(("nn.BatchNorm2d(widths[0]), nn.ReLU(),",
                "nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(4),"),),
    )},
)
