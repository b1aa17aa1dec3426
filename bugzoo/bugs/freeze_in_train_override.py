"""freeze_in_train_override: the configured freeze is applied only by the backbone's train().

As in OpenMMLab backbones (``frozen_stages``), the freeze lives in the backbone's overridden
``train()``: the loop only records that the backbone is frozen, and ``train()``, which the loop
has already called before the first step, is what applies it. Until the next ``train()`` call
(here: the first evaluation's return to training) the "frozen" backbone trains.
"""

from __future__ import annotations

from torch import nn

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


def train(self, mode: bool = True) -> nn.Module:
    # The backbone's own train(), as OpenMMLab backbones override it: switch the mode, then
    # apply the configured freeze (their _freeze_stages()). The freeze takes effect only when
    # something calls train() after it was configured.
    type(self).train(self, mode)
    if hasattr(self, "frozen"):
        self.requires_grad_(not self.frozen)
    return self


class FreezeInTrainOverride(Bug):
    def after_build(self, trainer) -> None:
        # The mistake, in two halves: the loop's freeze only configures the backbone (as
        # `frozen_stages=` does), and the backbone applies it in its train() override, which
        # fit() has already called before the first step.
        def schedule_freezing(self) -> None:
            n = int(self.cfg.optim.get("freeze_backbone_steps") or 0)
            if n > 0 and self.step in (0, n):
                self.model.backbone.frozen = self.step != n

        patch_method(trainer, "schedule_freezing", schedule_freezing)
        patch_method(trainer.model.backbone, "train", train)


BUG = FreezeInTrainOverride(
    id="freeze_in_train_override",
    title="Backbone freeze applied only inside the model's train()",
    category="optim",
    taxonomy={
        "T.mmpretrain-702": "literal",
        "H.api.missing_api_call": "partial: the call that applies the freeze (train(), which "
                                  "runs _freeze_stages()) is not made after the freeze is "
                                  "configured; it is made once, too early, not never",
    },
    honours_onset=False,
    symptom=("a linear probe that should train only its head: each step costs as much as full "
             "training, the backbone's weights drift from their initial values, and the "
             "probe's validation accuracy comes out well above what the frozen features "
             "support, close to full training"),
    check=SymptomCheck("final_val_acc", "higher"),
    explanation=("Some model libraries apply a configured freeze (frozen_stages) inside the "
                 "model's overridden train(): setting the option only records it, and the "
                 "parameters lose requires_grad when train() next runs. A loop that calls "
                 "model.train() once, before the freeze is configured, and evaluates only at "
                 "the end never triggers it, so every 'frozen' layer gets gradients and "
                 "optimizer updates. Nothing fails: the probe simply measures a fine-tuned "
                 "model and pays full training cost per step."),
    buggy="""\
class Backbone(nn.Module):
    def train(self, mode=True):
        super().train(mode)
        if self.frozen:                   # the freeze is applied only here
            self.requires_grad_(False)
        return self

model.train()
model.backbone.frozen = True              # configured after the last train() call
for x, y in loader:
    ...""",
    fixed="""\
model.train()
model.backbone.requires_grad_(False)      # applied where it is configured
for x, y in loader:
    ...""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("the gpt's output head is tied to its token embedding, part of the "
                          "backbone: a warm-up freeze of the backbone freezes the head too, so "
                          "there is no head-only warm-up for the mistake to break")},
    since="1.1",
    reproducers={model: SetupDelta(
        setup=(
            ("${LR}, 50,", "${LR}, ${STEPS},"),  # evaluated only at the end, as its scenario is
            (built, f"{built}model.backbone.requires_grad_(False)"
                    "  # a linear probe: the head trains\n"),
        ),
        patch=(
            (f"\n\nclass {name}(nn.Module):",
             "\n\nclass Backbone(nn.Sequential):  # applies its freeze in train()\n"
             "    frozen = False\n\n"
             "    def train(self, mode=True):\n"
             "        super().train(mode)\n"
             "        self.requires_grad_(not self.frozen)\n"
             "        return self\n"
             f"\n\nclass {name}(nn.Module):"),
            ("self.backbone = nn.Sequential(", "self.backbone = Backbone("),
            ("model.backbone.requires_grad_(False)", "model.backbone.frozen = True"),
        ),
    ) for model, name, built in (("mlp", "MLP", "model = MLP()\n"),
                                 ("resnet", "ResNet", "model = ResNet(mean, std)\n"))},
)
