"""feature_selection_by_pvalue: features are ranked by their ANOVA p-values, where the selection
keeps the highest scores, so the least informative features are kept."""

from __future__ import annotations

import torch
from scipy.special import fdtrc
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.data.base import f_scores


def p_values(self, data: DataBundle) -> Tensor:
    # The mistake: the score handed to the selection is the p-value of each feature's F test
    # (scikit-learn's f_classif returns (F, pval); the second was taken). A small p-value means
    # a feature separates the classes; the selection keeps the k largest scores, as it should
    # for F, and so keeps the k features that separate the classes least.
    x, y = data.train.x, data.train.y
    classes = int((torch.bincount(y, minlength=data.num_classes) > 0).sum())
    f = f_scores(x, y, data.num_classes)
    return torch.from_numpy(fdtrc(classes - 1, len(x) - classes, f.numpy()))


class FeatureSelectionByPvalue(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "score_features", p_values)


BUG = FeatureSelectionByPvalue(
    id="feature_selection_by_pvalue",
    title="Features ranked by p-value but the largest scores kept",
    category="data",
    taxonomy={
        "H.training.data.wrong_feature_selection": "literal",
        "H.training.data.discarding_features": "literal",
        "J.CPP": "partial: a feature-selection step of the preprocessing; most faults of the "
                 "type are label encoding and reshaping",
    },
    honours_onset=False,
    since="1.1",
    symptom=("the training loss hardly moves from its starting value (about log of the number "
             "of classes) and validation accuracy stays at chance, far below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A univariate test gives each feature an F statistic (large: it separates the "
                 "classes) and a p-value (small: it separates the classes). Selection code that "
                 "keeps the k highest scores is right for F and exactly wrong for p-values: fed "
                 "the p-values it keeps the k features least related to the labels and throws "
                 "the informative ones away. Nothing fails; the model simply has nothing to learn "
                 "from. Rank by F, or keep the k smallest p-values."),
    buggy="""\
F, pval = f_classif(X_train, y_train)
keep = np.argsort(pval)[-k:]            # the k largest scores
X_train, X_val = X_train[:, keep], X_val[:, keep]""",
    fixed="""\
F, pval = f_classif(X_train, y_train)
keep = np.argsort(F)[-k:]               # the k largest F (smallest p-values)
X_train, X_val = X_train[:, keep], X_val[:, keep]""",
    models=("mlp",),
    inapplicable={"gpt": ("ranking tabular features: the causal LM reads tokens, not features to"
                          " select")},
    reproducers={"mlp": Delta(
        patch=(("keep = f.topk(DIM).indices", "keep = p_value.topk(DIM).indices"),),
        settings={"PIPELINE": "selected", "NOISE_COLUMNS": 48},
    )},
)
