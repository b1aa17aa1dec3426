"""int_cast_in_forward: features pass through an integer dtype, which severs the gradient."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def forward(self, x):
    # The mistake: an integer cast (say, to "quantise" the features) has no gradient, so the
    # backbone is cut off from the loss; it also truncates the activations.
    features = self.backbone(x).int()
    return self.head(features.float())


class IntCastInForward(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model, "forward", forward,
                     active=from_onset(trainer))


BUG = IntCastInForward(
    id="int_cast_in_forward",
    title="Integer cast inside the forward pass",
    category="model",
    taxonomy={
        "H.tensors.input.wrong_type_layer":
            "partial: the cast happens inside the model, not at its input",
    },
    symptom=("the backbone never trains (integer tensors carry no gradient) and the head sees "
             "truncated features: the loss plateaus high"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Integer tensors cannot require gradients, so x.int() / x.long() / "
                 "x.to(torch.int32) on an activation returns a tensor with no grad_fn. Casting "
                 "back to float does not reconnect it: everything before the cast receives no "
                 "gradient, silently, and truncation throws away the fractional part of the "
                 "features."),
    buggy="""\
def forward(self, x):
    features = self.backbone(x).int()          # e.g. meant as quantisation
    return self.head(features.float())""",
    fixed="""\
def forward(self, x):
    features = self.backbone(x)
    return self.head(features)""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("an integer cast of float features: the causal LM's inputs are integer"
                          " token ids already")},
    reproducers={"mlp": Delta(
        patch=(("return self.head(self.backbone(x))",
                "return self.head(self.backbone(x).int().float())"),),
    ), "resnet": Delta(
        patch=(("return self.head(self.backbone((x - self.mean) / self.std))",
                "return self.head(self.backbone((x - self.mean) / self.std).int().float())"),),
    )},
)
