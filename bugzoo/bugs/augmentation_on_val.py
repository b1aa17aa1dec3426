"""augmentation_on_val: random training augmentation is also applied to the validation images."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


def random_augment(x: Tensor, g: torch.Generator, shift: int, noise: float) -> Tensor:
    """Random flips, a random translation of up to ``shift`` pixels and Gaussian noise."""
    flip = torch.rand(len(x), generator=g) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    dy, dx = torch.randint(-shift, shift + 1, (2,), generator=g).tolist()
    x = x.roll((dy, dx), dims=(-2, -1))
    return x + noise * torch.randn(x.shape, generator=g)


class AugmentationOnVal(Bug):
    def after_build(self, trainer) -> None:
        p = trainer.cfg.bug.params
        g = torch.Generator().manual_seed(trainer.seed)
        split = replace(trainer.data.val)
        inputs = split.inputs

        def augmented_inputs(self, index):
            # The mistake: the validation dataset was built with the training transform.
            (x,) = inputs(index)
            return (random_augment(x, g, int(p.shift), float(p.noise)),)

        patch_method(split, "inputs", augmented_inputs)
        trainer.val_loader.split = split


BUG = AugmentationOnVal(
    id="augmentation_on_val",
    title="Random augmentation applied to validation data",
    category="eval",
    honours_onset=False,
    symptom=("validation accuracy is lower and noisier than accuracy on clean holdout data; it "
             "changes between evaluations of the same weights"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Validation should measure the model on the data distribution it will meet. "
                 "Reusing the training transform (random flips, shifts, noise) for validation "
                 "evaluates on randomly distorted inputs: the metric is pessimistic, "
                 "non-deterministic, and model selection on it is unreliable."),
    buggy="""\
train_tf = T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(16, padding=4), AddNoise()])
val_set = ImageFolder(val_dir, transform=train_tf)""",
    fixed="""\
val_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])   # deterministic
val_set = ImageFolder(val_dir, transform=val_tf)""",
    models=("resnet",),
)
