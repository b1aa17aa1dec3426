"""double_softmax: the model's forward ends in softmax and feeds CrossEntropyLoss."""

from __future__ import annotations

from torch import Tensor, nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def head_with_softmax(self, features: Tensor) -> Tensor:
    # The mistake: the classifier head returns probabilities, and CrossEntropyLoss applies
    # log-softmax to them again.
    return nn.Linear.forward(self, features).softmax(dim=-1)


class DoubleSoftmax(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.head, "forward", head_with_softmax)


BUG = DoubleSoftmax(
    id="double_softmax",
    title="Softmax before CrossEntropyLoss",
    category="loss",
    taxonomy={
        "H.model.layers.redundant_softmax": "literal",
        "H.training.loss.wrong_calculation": "literal",
        "D.act": "literal",
        "A.slow_convergence": "literal",
        "A.activation_issue": "literal",
        "J.ACH": "partial: output softmax only, not a hidden activation",
        "J.LWC": "literal",
        "J.LAD": "literal",
    },
    honours_onset=False,
    symptom=("loss stays near log(C) and falls slowly: gradients are squashed through two "
             "softmaxes; validation loss ends far above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("nn.CrossEntropyLoss expects raw logits and applies log-softmax itself. Feeding "
                 "it probabilities computes log(softmax(softmax(z))): outputs confined to [0, 1] "
                 "make every class look nearly equally likely, so the loss cannot go much below "
                 "log(C) - 1 and gradients shrink."),
    buggy="""\
class Classifier(nn.Module):
    def forward(self, x):
        return torch.softmax(self.head(self.backbone(x)), dim=-1)

loss = nn.CrossEntropyLoss()(model(x), y)""",
    fixed="""\
class Classifier(nn.Module):
    def forward(self, x):
        return self.head(self.backbone(x))      # raw logits

loss = nn.CrossEntropyLoss()(model(x), y)      # log-softmax happens inside""",
    reproducers={"mlp": Delta(
        patch=(
            ("return self.head(self.backbone(x))",
             "return torch.softmax(self.head(self.backbone(x)), dim=-1)"),
        ),
    ), **dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(
            ("return self.head(self.backbone(tokens, lengths))",
             "return torch.softmax(self.head(self.backbone(tokens, lengths)), dim=-1)"),
        ),
    )), "resnet": Delta(
        patch=(
            ("return self.head(self.backbone((x - self.mean) / self.std))",
             "return torch.softmax(self.head(self.backbone((x - self.mean) / self.std)), dim=-1)"),
        ),
    ), "gpt": Delta(
        patch=(
            ("return self.head(self.norm(self.blocks(x)))",
             "return torch.softmax(self.head(self.norm(self.blocks(x))), dim=-1)"),
        ),
    )},
)
