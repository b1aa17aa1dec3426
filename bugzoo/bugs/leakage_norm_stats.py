"""leakage_norm_stats: normalisation statistics are fitted on train + val before the split."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Symptom, patch_method
from bugzoo.data.base import fit_normalization


class LeakageNormStats(Bug):
    def before_build(self, trainer) -> None:
        # The mistake: the scaler is fitted on every example at hand (train and validation)
        # before the split, instead of on the training split alone. The holdout stands for
        # data that arrives later, so it is not part of the fit.
        def normalize(self, data):
            if data.norm_dims is None:
                return data
            norm = fit_normalization(torch.cat([data.train.x, data.val.x]), data.norm_dims)
            return data.with_splits(train=norm.apply(data.train), val=norm.apply(data.val),
                                    holdout=norm.apply(data.holdout))

        patch_method(trainer, "normalize", normalize)


BUG = LeakageNormStats(
    id="leakage_norm_stats",
    title="Normalisation statistics fitted before the train/val split",
    category="data",
    symptom=Symptom("val_holdout_gap", "higher",
                    "validation accuracy is (slightly) optimistic relative to untouched "
                    "holdout data; with i.i.d. splits the effect is small"),
    explanation=("Preprocessing fitted on data that includes the validation split lets "
                 "validation statistics shape the inputs the model trains on, so validation "
                 "no longer estimates performance on unseen data. How much it inflates the "
                 "metric depends on how different the validation split is from the training "
                 "split: with i.i.d. splits of a few thousand examples the mean and standard "
                 "deviation barely move and the gap stays within seed noise; with small or "
                 "shifted splits (time series, per-site data) it matters."),
    buggy="""\
x = (x - x.mean(0)) / x.std(0)                # statistics of all examples
x_train, x_val = x[:n_train], x[n_train:]""",
    fixed="""\
x_train, x_val = x[:n_train], x[n_train:]
mean, std = x_train.mean(0), x_train.std(0)   # statistics of the training split only
x_train, x_val = (x_train - mean) / std, (x_val - mean) / std""",
    models=("mlp", "resnet"),
)
