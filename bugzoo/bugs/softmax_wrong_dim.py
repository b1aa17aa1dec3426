"""softmax_wrong_dim: the head's softmax normalises over the batch, then CrossEntropyLoss."""

from __future__ import annotations

from torch import Tensor, nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def head_with_batch_softmax(self, features: Tensor) -> Tensor:
    # The mistake: dim=0 is the batch dimension of [B, C] logits.
    return nn.Linear.forward(self, features).softmax(dim=0)


class SoftmaxWrongDim(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.head, "forward", head_with_batch_softmax)


BUG = SoftmaxWrongDim(
    id="softmax_wrong_dim",
    title="Softmax over the batch dimension",
    category="model",
    taxonomy={
        "H.tensors.shape.other": "partial: one sub-form: a softmax over the wrong axis",
        "D.act": "partial: the output activation normalises the wrong axis",
        "A.activation_issue": "literal",
        "J.ACH": "partial: output softmax only, not a hidden activation",
    },
    honours_onset=False,
    symptom=("the loss barely moves below log(C); each class column is normalised across the batch,"
             " so a prediction depends on the other samples and validation accuracy ends well below"
             " the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("With logits of shape [B, C], softmax(dim=0) normalises each class over the "
                 "samples of the batch instead of each sample over the classes. Every output is "
                 "about 1/B, CrossEntropyLoss (which applies its own log-softmax over classes) "
                 "sees nearly uniform scores and tiny gradients, and what the model learns is "
                 "how a sample compares with the rest of its batch (32 in training, 500 in "
                 "evaluation), not which class it belongs to."),
    buggy="""\
def forward(self, x):
    return torch.softmax(self.head(self.backbone(x)), dim=0)

loss = nn.CrossEntropyLoss()(model(x), y)""",
    fixed="""\
def forward(self, x):
    return self.head(self.backbone(x))      # raw logits; softmax, if needed, over dim=-1

loss = nn.CrossEntropyLoss()(model(x), y)""",
    models=("mlp", "gpt"),  # with 2 classes (lstm, transformer) the harm is marginal
    reproducers={"mlp": Delta(
        patch=(
            ("return self.head(self.backbone(x))",
             "return torch.softmax(self.head(self.backbone(x)), dim=0)"),
        ),
    ), "gpt": Delta(
        patch=(
            ("return self.head(self.norm(self.blocks(x)))",
             "return torch.softmax(self.head(self.norm(self.blocks(x))), dim=0)"),
        ),
    )},
)
