"""optimizer_stale_params: the classifier head is replaced after the optimizer was built."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck


class OptimizerStaleParams(Bug):
    def after_build(self, trainer) -> None:
        # The mistake: a fresh head is attached after the optimizer captured model.parameters(),
        # so the optimizer keeps updating the old, detached head and never the new one.
        old = trainer.model.head
        trainer.model.head = nn.Linear(old.in_features, old.out_features).to(trainer.device)


BUG = OptimizerStaleParams(
    id="optimizer_stale_params",
    title="Head replaced after the optimizer was built",
    category="optim",
    taxonomy={
        "H.api.wrong_api_usage": "literal",
        "T.pytorch-104336": "partial: the same stale-reference family, in one process",
        "J.APW": "literal",
    },
    honours_onset=False,
    symptom=("the new head keeps its random weights (the optimizer updates the old one): the loss "
             "hardly falls and the validation loss ends far above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("An optimizer holds references to the parameter tensors it was given. "
                 "Replacing a submodule afterwards (a new classifier head for fine-tuning, a "
                 "resized output layer) creates new parameters the optimizer has never seen: "
                 "they receive gradients but are never updated, and optimizer.zero_grad() "
                 "does not clear them, so their .grad grows without bound."),
    buggy="""\
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.head = nn.Linear(hidden, num_classes)   # after the optimizer: never trained""",
    fixed="""\
model.head = nn.Linear(hidden, num_classes)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)""",
    patches_only=False,  # it also edits the built run directly
    reproducers=dict.fromkeys(("mlp", "lstm", "transformer", "resnet", "gpt"), Delta(
        patch=(("optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n",
                "optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
                "model.head = nn.Linear(model.head.in_features, model.head.out_features)\n"),),
    )),
)
