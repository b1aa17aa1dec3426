"""inplace_op_autograd: features are L2-normalised in place, overwriting a tensor autograd saved."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def forward(self, *inputs):
    features = self.backbone(*inputs)
    # The mistake: norm() saved `features` for its backward; the in-place division overwrites it.
    features /= features.norm(dim=-1, keepdim=True)
    return self.head(features)


class InplaceOpAutograd(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model, "forward", forward,
                     active=from_onset(trainer))


BUG = InplaceOpAutograd(
    id="inplace_op_autograd",
    title="In-place operation on a tensor autograd needs",
    category="model",
    taxonomy={
        "H.api.wrong_api_usage": "literal",
        "J.APW": "literal",
    },
    symptom=("the first backward() raises RuntimeError: one of the variables needed for gradient "
             "computation has been modified by an inplace operation"),
    check=SymptomCheck("crashed", "event"),
    explanation=("Autograd saves some inputs and outputs of each operation for the backward "
                 "pass and checks their version counters. Modifying such a tensor in place "
                 "(x /= ..., x += ..., relu_, masked_fill_) after it was saved makes the saved "
                 "value stale; backward() detects the version mismatch and raises."),
    buggy="""\
features = self.backbone(x)
features /= features.norm(dim=-1, keepdim=True)   # in place: norm() saved `features`""",
    fixed="""\
features = self.backbone(x)
features = features / features.norm(dim=-1, keepdim=True)""",
    loud=True,
)
