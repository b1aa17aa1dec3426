"""leakage_feature_selection: features are selected by their link to the labels on all the data."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.data.base import f_scores


def scores_on_train_and_val(self, data: DataBundle) -> Tensor:
    # The mistake: the features are scored against the labels of every labelled row at hand,
    # validation included, before the split is used; the "best" features are then partly the
    # ones that happen to fit the validation labels.
    x = torch.cat([data.train.x, data.val.x])
    return f_scores(x, torch.cat([data.train.y, data.val.y]), data.num_classes)


class LeakageFeatureSelection(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "score_features", scores_on_train_and_val)


BUG = LeakageFeatureSelection(
    id="leakage_feature_selection",
    title="Feature selection fitted on all the data before the split",
    category="data",
    taxonomy={
        "H.training.data.wrong_feature_selection":
            "partial: the features are selected with the validation labels too",
    },
    honours_onset=False,
    symptom=("validation accuracy looks far better than the accuracy on data that arrives later "
             "(the holdout): the validation labels took part in choosing the features"),
    check=SymptomCheck("val_holdout_gap", "higher"),
    explanation=("Selecting features by how well they separate the classes is fitting on the "
                 "labels. Done on every labelled row before the split, it picks, among many "
                 "noise features, the ones that happen to agree with the validation labels, so "
                 "validation stops standing for unseen data. With many features and few rows "
                 "the leak is large: Hastie, Tibshirani and Friedman (ESL, section 7.10.2) show "
                 "cross-validation reporting 3% error for a classifier whose true error is 50%. "
                 "Fit every label-using step (selection, target encoding) inside the training "
                 "split, or inside each fold."),
    buggy="""\
selector = SelectKBest(f_classif, k=20).fit(X_all, y_all)    # train + val rows
X_train, X_val = selector.transform(X_train), selector.transform(X_val)""",
    fixed="""\
selector = SelectKBest(f_classif, k=20).fit(X_train, y_train)  # training rows only
X_train, X_val = selector.transform(X_train), selector.transform(X_val)""",
    models=("mlp",),
    inapplicable={"gpt": ("feature selection fitted before the split: the causal LM reads "
                          "tokens, not features to select")},
    reproducers={"mlp": Delta(
        # few rows and many columns, the blobs barely apart: selection has noise to overfit
        patch=(("x_fit, y_fit = x_train, y_train",
                "x_fit, y_fit = torch.cat([x_train, x_val]), torch.cat([y_train, y_val])"),),
        settings={"PIPELINE": "selected", "NOISE_COLUMNS": 2000, "N_TRAIN": 100, "N_VAL": 100,
                  "SPREAD": 0.3},
    )},
)
