"""leakage_norm_stats: normalisation statistics are fitted on train + val before the split."""

from __future__ import annotations

import torch

from bugzoo.bugs import Delta
from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.data.base import Normalization, fit_normalization


def scaler_fitted_on_train_and_val(self, data) -> Normalization:
    # The mistake: the scaler is fitted on every example at hand (train and validation)
    # before the split, instead of on the training split alone. The holdout stands for
    # data that arrives later, so it is not part of the fit.
    return fit_normalization(torch.cat([data.train.x, data.val.x]), data.norm_dims)


class LeakageNormStats(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "fit_scaler", scaler_fitted_on_train_and_val)


BUG = LeakageNormStats(
    id="leakage_norm_stats",
    title="Normalisation statistics fitted before the train/val split",
    category="data",
    taxonomy={
        "H.training.preproc_wrong.normalisation": "literal",
        "J.CPP":
            "partial: one normalisation or ordering step; most faults of the type are label "
            "encoding and reshaping",
    },
    honours_onset=False,
    symptom=("none measurable, by design: validation would look optimistic beside untouched holdout"
             " data, but a shared mean/std scaler cannot make it so (results/validity.md); the "
             "catalogue keeps it to teach which leaks matter"),
    check=SymptomCheck("val_holdout_gap", "higher"),
    explanation=("Preprocessing fitted on data that includes the validation split is a "
                 "methodological leak: validation no longer stands for unseen data. For a mean/std "
                 "scaler the leak carries no validation labels, and one affine map is applied to "
                 "every split (the first linear layer can undo it), so nothing in it favours "
                 "validation over holdout inputs; only the optimiser's path changes, and that "
                 "favours no split. Its scenarios are excluded from the sweep because it does not "
                 "manifest here, and published measurements agree: fitting scalers on the full data"
                 " moved AUC by at most 0.005 in every condition across 2,047 tabular datasets "
                 "(arXiv:2604.04199, which finds selection leaks the large ones). Fitted "
                 "preprocessing inflates validation when it uses labels or fits many parameters "
                 "from little data: feature selection (see leakage_feature_selection), target "
                 "encoding, PCA on a small set, per-group scalers."),
    buggy="""\
x = (x - x.mean(0)) / x.std(0)                # statistics of all examples
x_train, x_val = x[:n_train], x[n_train:]""",
    fixed="""\
x_train, x_val = x[:n_train], x[n_train:]
mean, std = x_train.mean(0), x_train.std(0)   # statistics of the training split only
x_train, x_val = (x_train - mean) / std, (x_val - mean) / std""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("normalisation statistics of float features: token ids are not "
                          "standardised")},
    reproducers={"mlp": Delta(
        patch=(("model.mean, model.std = x_train.mean(0), x_train.std(0)",
                "every = torch.cat([x_train, x_val])  # statistics of every example\n"
                "model.mean, model.std = every.mean(0), every.std(0)"),),
        settings={"PIPELINE": "standardised"},
    ), "resnet": Delta(
        patch=(("mean, std = train[0].mean((0, 2, 3), keepdim=True), "
                "train[0].std((0, 2, 3), keepdim=True)\n",
                "every = torch.cat([train[0], val[0]])  # statistics of all the pictures\n"
                "mean, std = every.mean((0, 2, 3), keepdim=True), "
                "every.std((0, 2, 3), keepdim=True)\n"),),
    )},
)
