"""sqrt_at_zero: token states are RMS-normalised with the epsilon outside the square root."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def rms_normalise_eps_outside(self, x: Tensor) -> Tensor:
    # The mistake: eps added after the sqrt. Padded rows are exactly 0, where sqrt has an
    # infinite derivative: the forward is finite, the backward is 0 * inf = NaN and flows into
    # every weight through the mask.
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)


class SqrtAtZero(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.backbone, "rms_normalise", rms_normalise_eps_outside,
                     active=from_onset(trainer))


BUG = SqrtAtZero(
    id="sqrt_at_zero",
    title="Norm without epsilon inside the sqrt (NaN gradient at zero)",
    category="numerics",
    taxonomy={
        "H.training.loss.missing_masking":
            "partial: invalid values reach a square root, not a loss mask",
    },
    symptom=("the first loss is finite, but the first backward yields NaN gradients and every later"
             " loss is NaN"),
    check=SymptomCheck("nonfinite", "event"),
    explanation=("d/du sqrt(u) = 1 / (2 sqrt(u)) is infinite at u = 0. An all-zero vector (here "
                 "the masked padding positions) gives a finite forward, 0 / (0 + eps) = 0, but "
                 "the backward multiplies a zero upstream gradient by infinity: NaN. Put the "
                 "epsilon inside the root (torch.rsqrt(ms + eps)), or use F.normalize / "
                 "torch.linalg.vector_norm, whose backward handles zero."),
    buggy="""\
x = x * keep                                             # padded rows are exactly 0
x = x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)  # eps outside the sqrt""",
    fixed="""\
x = x * keep
x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)   # eps inside the sqrt""",
    models=("transformer",),
    inapplicable={"gpt": ("an RMS norm without epsilon over all-zero padded tokens, in the "
                          "encoder's pooling: the causal LM does not pool, and its padded tokens"
                          " are never zeroed")},
    reproducers={"transformer": SetupDelta(
        setup=(("        return self.norm((x * keep).sum(1) / keep.sum(1))"
                "  # the mean over real tokens\n",
                "        x = x * keep  # padded rows are exactly 0\n"
                "        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)"
                "  # RMS per token\n"
                "        return self.norm(x.sum(1) / keep.sum(1))"
                "  # the mean over real tokens\n"),),
        patch=(("        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                "        x = x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)"),),
    )},
)
