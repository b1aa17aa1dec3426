"""wrong_normalization: features on wildly different scales are fed to the MLP unstandardised."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


class WrongNormalization(Bug):
    def before_build(self, trainer) -> None:
        # The mistake: the standardisation step is skipped; raw features go to the model.
        patch_method(trainer, "normalize", lambda self, data: data)


BUG = WrongNormalization(
    id="wrong_normalization",
    title="Inputs not normalised",
    category="data",
    taxonomy={
        "H.training.preproc_missing.normalisation": "literal",
        "H.training.preproc_missing.input_scaling": "literal",
        "A.abnormal_data": "literal",
        "J.CPP":
            "partial: one normalisation or ordering step; most faults of the type are label "
            "encoding and reshaping",
    },
    honours_onset=False,
    symptom=("a few large-scale features dominate the first layer; loss is erratic and validation "
             "accuracy ends well below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("The tabular features span about six orders of magnitude. Without "
                 "standardisation the first layer's pre-activations are dominated by the "
                 "largest-scale features, gradients for those weights are huge and the "
                 "informative small-scale features are effectively invisible."),
    buggy="""\
x_train, x_val = raw_train, raw_val                   # no standardisation""",
    fixed="""\
mean, std = raw_train.mean(0), raw_train.std(0)       # training statistics only
x_train, x_val = (raw_train - mean) / std, (raw_val - mean) / std""",
    models=("mlp",),
    inapplicable={"gpt": "unnormalised float inputs: token ids are looked up, not normalised"},
    reproducers={"mlp": Delta(
        patch=(("model.mean, model.std = x_train.mean(0), x_train.std(0)  # the training "
                "statistics\n", ""),),
        settings={"PIPELINE": "standardised"},
    )},
)
