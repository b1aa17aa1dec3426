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
                    "expected: validation accuracy optimistic relative to untouched holdout "
                    "data; a shared mean/std scaler cannot produce that (see the explanation)"),
    explanation=("Preprocessing fitted on data that includes the validation split is a "
                 "methodological leak: validation no longer stands for unseen data. For a "
                 "mean/std scaler the leak carries no validation labels, and one affine map is "
                 "applied to every split (the first linear layer can undo it), so nothing in "
                 "it favours validation over holdout inputs. Only the optimiser's path "
                 "changes (Adam and weight decay are not invariant to input scale), and that "
                 "favours no split. Measured (mlp, 150 steps, n_train 200, seeds 0/1): "
                 "val-holdout gap 0.001/0.012 buggy vs -0.008/0.013 clean. Fitted "
                 "preprocessing inflates validation when it uses labels or has many "
                 "parameters per example: target encoding, feature selection or PCA fitted "
                 "on little data, per-group scalers. The scenarios are excluded from the "
                 "bench."),
    buggy="""\
x = (x - x.mean(0)) / x.std(0)                # statistics of all examples
x_train, x_val = x[:n_train], x[n_train:]""",
    fixed="""\
x_train, x_val = x[:n_train], x[n_train:]
mean, std = x_train.mean(0), x_train.std(0)   # statistics of the training split only
x_train, x_val = (x_train - mean) / std, (x_val - mean) / std""",
    models=("mlp", "resnet"),
)
