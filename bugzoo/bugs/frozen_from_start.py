"""frozen_from_start: the backbone is built with requires_grad=False and never trained."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck


class FrozenFromStart(Bug):
    def after_build(self, trainer) -> None:
        # The mistake: code meant for fine-tuning a pretrained backbone freezes it, but here
        # the backbone is freshly initialised, so its random features are all the head gets.
        trainer.model.backbone.requires_grad_(False)


BUG = FrozenFromStart(
    id="frozen_from_start",
    title="Backbone frozen from the start",
    category="optim",
    models=("mlp", "lstm", "transformer", "resnet"),
    inapplicable={"gpt": ("the gpt's output head is its input embedding, tied, so it is part of "
                          "the backbone: freezing the backbone freezes every parameter and the "
                          "first backward fails, a crash rather than the silent stall this bug is")},
    taxonomy={
        "T.pytorch-forum-84911": "literal",
        "T.mmpretrain-702": "partial: the opposite direction: layers meant to train stay frozen",
    },
    honours_onset=False,
    symptom=("only the head learns: the loss falls a little and plateaus, backbone parameters never"
             " change, validation accuracy ends well below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Parameters with requires_grad=False receive no gradient and are skipped by "
                 "the optimizer. Freezing a randomly initialised backbone (often copied from "
                 "a fine-tuning recipe that assumed pretrained weights) leaves a linear "
                 "classifier on random features; a frozen layer is one of the usual reasons "
                 "the loss barely moves."),
    buggy="""\
model = Classifier()
for p in model.backbone.parameters():
    p.requires_grad = False                   # meant for a pretrained backbone
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)""",
    fixed="""\
model = Classifier()                          # random init: train everything
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)""",
    reproducers={"mlp": Delta(
        patch=(
            ("model = MLP()\n",
             "model = MLP()\n"
             "for p in model.backbone.parameters():\n"
             "    p.requires_grad = False\n"),
        ),
    ), **dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(
            ("model = Classifier()\n",
             "model = Classifier()\n"
             "for p in model.backbone.parameters():\n"
             "    p.requires_grad = False\n"),
        ),
    )), "resnet": Delta(
        patch=(
            ("model = ResNet(mean, std)\n",
             "model = ResNet(mean, std)\n"
             "for p in model.backbone.parameters():\n"
             "    p.requires_grad = False\n"),
        ),
    )},
    patches_only=False,  # it also edits the built run directly
)
