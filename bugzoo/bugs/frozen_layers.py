"""frozen_layers: a backbone frozen for a warm-up is never unfrozen at the scheduled step."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


class FrozenLayers(Bug):
    def before_build(self, trainer) -> None:
        # The mistake: the freeze at step 0 happens, the unfreeze at the scheduled step does not
        # (e.g. the unfreeze callback checks the wrong step counter or was never registered).
        def schedule_freezing(self) -> None:
            pass

        patch_method(trainer, "schedule_freezing", schedule_freezing,
                     active=from_onset(trainer))


BUG = FrozenLayers(
    id="frozen_layers",
    title="Backbone frozen for warm-up is never unfrozen",
    category="optim",
    models=("mlp", "lstm", "transformer", "resnet"),
    inapplicable={"gpt": ("the gpt's output head is its input embedding, tied, so it is part of "
                          "the backbone: freezing the backbone freezes every parameter and the "
                          "first backward fails, a crash rather than the silent stall this bug is")},
    taxonomy={
        "H.api.missing_api_call": "literal",
        "T.mmpretrain-702": "partial: the opposite direction: layers meant to train stay frozen",
    },
    symptom=("after the scheduled unfreeze step the loss keeps falling only as fast as a linear "
             "probe on fixed random features allows; the backbone's gradients stay absent and "
             "validation accuracy ends below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Freezing a backbone for the first N steps (training only the new head) is a "
                 "common warm-up. If the unfreeze never runs, every backbone parameter keeps "
                 "requires_grad=False: it gets no gradient, the optimizer skips it, and the "
                 "rest of training fits only the head on top of the backbone's initial "
                 "features. Nothing crashes; the model is just much weaker."),
    buggy="""\
model.backbone.requires_grad_(False)          # warm-up: head only
for step, (x, y) in enumerate(loader):
    if step == unfreeze_at and epoch > 0:     # never true in a one-epoch-style loop
        model.backbone.requires_grad_(True)
    ...""",
    fixed="""\
model.backbone.requires_grad_(False)          # warm-up: head only
for step, (x, y) in enumerate(loader):
    if step == unfreeze_at:
        model.backbone.requires_grad_(True)
    ...""",
    onset="${optim.freeze_backbone_steps}",
    onset_note="the step at which the backbone should have been unfrozen",
    reproducers=dict.fromkeys(("mlp", "lstm", "transformer", "resnet"), SetupDelta(
        setup=(
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "UNFREEZE_AT = 50  # warm-up: the head trains alone until this step\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            ("        optimizer.zero_grad()\n",
             "        if step == 0:\n"
             "            model.backbone.requires_grad_(False)\n"
             "        if step == UNFREEZE_AT:\n"
             "            model.backbone.requires_grad_(True)\n"
             "        optimizer.zero_grad()\n"),
        ),
        patch=(
            ("        if step == UNFREEZE_AT:\n",
             "        if i == UNFREEZE_AT:\n"),
        ),
    )),
)
