"""detached_graph: a .detach() in the forward cuts the backbone off from the loss."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def forward(self, *inputs):
    features = self.backbone(*inputs).detach()  # the mistake: no gradient reaches the backbone
    return self.head(features)


class DetachedGraph(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model, "forward", forward,
                     active=from_onset(trainer))


BUG = DetachedGraph(
    id="detached_graph",
    title=".detach() in the forward pass",
    category="model",
    taxonomy={
        "H.model.type.wrong_architecture":
            "partial: the forward cuts the gradient path: a wiring error, not a layout choice",
        "J.MWA": "partial: the forward cuts the gradient path: a wiring error, not a layout choice",
    },
    symptom=("only the head learns, on the backbone's random initial features: the loss plateaus "
             "well above the clean run's; backbone parameters get no gradient"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("tensor.detach() returns a tensor outside the autograd graph. Calling it on an "
                 "intermediate activation (often left over from logging or from feature "
                 "extraction code) stops backpropagation there: every layer before it gets no "
                 "gradient (grad stays None) and never trains. Nothing errors, because the "
                 "layers after the detach still have gradients."),
    buggy="""\
def forward(self, x):
    features = self.backbone(x).detach()
    return self.head(features)""",
    fixed="""\
def forward(self, x):
    features = self.backbone(x)
    return self.head(features)""",
    reproducers={"mlp": Delta(
        patch=(("return self.head(self.backbone(x))",
                "return self.head(self.backbone(x).detach())"),),
    ), **dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(("return self.head(self.backbone(tokens, lengths))",
                "return self.head(self.backbone(tokens, lengths).detach())"),),
    )), "resnet": Delta(
        patch=(("return self.head(self.backbone((x - self.mean) / self.std))",
                "return self.head(self.backbone((x - self.mean) / self.std).detach())"),),
    ), "gpt": Delta(
        patch=(("return self.head(self.norm(self.blocks(x)))",
                "return self.head(self.norm(self.blocks(x)).detach())"),),
    )},
)
