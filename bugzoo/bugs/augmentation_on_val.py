"""augmentation_on_val: random training augmentation is also applied to the validation images."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from bugzoo.bugs import Delta
from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.data.base import Split


def training_transform(x: Tensor, g: torch.Generator, padding: int, noise: float) -> Tensor:
    """The training augmentation: a random horizontal flip, a random 16x16 crop of the image
    padded by ``padding`` zeros, and Gaussian noise; per image, drawn from ``g``."""
    out = torch.empty_like(x)
    padded = nn.functional.pad(x, (padding,) * 4)
    size = x.shape[-1]
    for i in range(len(x)):
        image = padded[i].flip(-1) if bool(torch.rand(1, generator=g) < 0.5) else padded[i]
        top, left = torch.randint(0, 2 * padding + 1, (2,), generator=g).tolist()
        out[i] = image[:, top:top + size, left:left + size]
    return out + noise * torch.randn(x.shape, generator=g)


def inputs_through_training_transform(self, index) -> tuple[Tensor, ...]:
    # The mistake: the validation dataset was built with the training transform.
    (x,) = Split.inputs(self, index)
    return (training_transform(x, self.generator, self.padding, self.noise),)


class AugmentationOnVal(Bug):
    def after_build(self, trainer) -> None:
        p = trainer.cfg.bug.params
        split = replace(trainer.data.val)
        split.generator = torch.Generator().manual_seed(trainer.seed)
        split.padding, split.noise = int(p.padding), float(p.noise)
        patch_method(split, "inputs", inputs_through_training_transform)
        trainer.val_loader.split = split


BUG = AugmentationOnVal(
    id="augmentation_on_val",
    title="Random augmentation applied to validation data",
    category="eval",
    taxonomy={
        "H.training.process.redundant_augmentation":
            "partial: the augmentation is applied to validation, not redundant in training",
    },
    honours_onset=False,
    symptom=("validation accuracy is lower and noisier than accuracy on clean holdout data; it "
             "changes between evaluations of the same weights"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Validation should measure the model on the data distribution it will meet. "
                 "Reusing the training transform (random flips, shifts, noise) for validation "
                 "evaluates on randomly distorted inputs: the metric is pessimistic, "
                 "non-deterministic, and model selection on it is unreliable."),
    buggy="""\
train_tf = T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(16, padding=4), AddNoise(0.5)])
val_set = ImageFolder(val_dir, transform=train_tf)""",
    fixed="""\
val_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])   # deterministic
val_set = ImageFolder(val_dir, transform=val_tf)""",
    models=("resnet",),
    inapplicable={"gpt": ("random image augmentation: the language has none to apply to "
                          "validation")},
    params={
        "padding": 4,  # the random crop"s padding in pixels (RandomCrop(16, padding=4))
        "noise": 0.5,  # std of added Gaussian noise (standardised units)
    },
    reproducers={"resnet": Delta(
        patch=(("mean, std = train[0].mean((0, 2, 3), keepdim=True), "
                "train[0].std((0, 2, 3), keepdim=True)\n",
                "mean, std = train[0].mean((0, 2, 3), keepdim=True), "
                "train[0].std((0, 2, 3), keepdim=True)\n\n\n"
                "def training_transform(x):  # random flips, shifts of up to 2 pixels, and noise\n"
                "    x = torch.where(torch.rand(len(x), 1, 1, 1) < 0.5, x.flip(-1), x)\n"
                "    shift = torch.randint(-2, 3, (2,)).tolist()\n"
                "    return x.roll(shift, (-2, -1)) + 0.5 * std * torch.randn_like(x)\n\n\n"
                "val = training_transform(val[0]), val[1]\n"),),
    )},
)
