"""head_width_hardcoded: the classifier head has 10 outputs, not the dataset's class count."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_with_ten_outputs(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    # The mistake: out_features=10, copied from a 10-class example, not data.num_classes
    model.head = nn.Linear(model.head.in_features, 10)
    with torch.no_grad():  # started small, as the clean builder starts every head
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()
    return model


class HeadWidthHardcoded(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_with_ten_outputs)


BUG = HeadWidthHardcoded(
    id="head_width_hardcoded",
    title="Classifier head width hard-coded to 10 classes",
    category="model",
    taxonomy={
        "H.model.layer_props.wrong_output_shape": "literal",
    },
    honours_onset=False,
    symptom=("the first loss is log(10), not log of the number of classes as a fresh "
             "classifier's should be; training otherwise proceeds"),
    check=SymptomCheck("initial_loss", "higher"),
    explanation=("CrossEntropyLoss only checks that every label is below the number of outputs, "
                 "so a head with 10 outputs trains on a 6-class (or 2-class) task without error. "
                 "The extra outputs are classes that never occur: at the start they share the "
                 "probability mass, so the loss starts at log(10) instead of log(C), and the "
                 "model spends part of training pushing them down; their scores also enter "
                 "every softmax and argmax it is used with later."),
    buggy="""\
self.head = nn.Linear(hidden, 10)       # from the MNIST example""",
    fixed="""\
self.head = nn.Linear(hidden, num_classes)""",
    models=("mlp", "lstm"),
    inapplicable={"gpt": ("a classifier head typed with a class count: the causal LM's head is "
                          "its tied input embedding, sized by the vocabulary")},
    reproducers={"mlp": Delta(
        patch=(
            ("self.head = nn.Linear(64, CLASSES)", "self.head = nn.Linear(64, 10)"),
        ),
    ), "lstm": Delta(
        patch=(
            ("self.head = nn.Linear(64, 2)",
             "self.head = nn.Linear(64, 10)"),
        ),
    )},
    since="1.1",
)
