"""attention_unscaled: attention scores not divided by sqrt(head width)."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method
from bugzoo.models.gpt import CausalSelfAttention


def unscaled_scores(self, q: Tensor, k: Tensor) -> Tensor:
    # The mistake: the dot products are not divided by sqrt(head width), so their spread grows
    # with the width and the softmax saturates onto one key.
    return q @ k.transpose(-2, -1)


class AttentionUnscaled(Bug):
    def after_build(self, trainer) -> None:
        for module in trainer.model.modules():
            if isinstance(module, CausalSelfAttention):
                patch_method(module, "scores", unscaled_scores, active=from_onset(trainer))


BUG = AttentionUnscaled(
    id="attention_unscaled",
    title="Attention scores without the 1/sqrt(d) scale",
    category="model",
    taxonomy={
        "L.attention_scale": "literal",
    },
    symptom=("training is slower and noisier than it should be; validation loss ends above a "
             "correctly scaled model's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("The dot product of two random d-dimensional vectors has a spread that grows "
                 "with sqrt(d). Scaled dot-product attention divides by sqrt(d_head) so that "
                 "the softmax sees scores of unit scale. Without it, as the weights grow the "
                 "scores spread wide, the softmax puts nearly all weight on one key and its "
                 "gradient vanishes for the rest: attention learns late and brittle."),
    buggy="""\
scores = q @ k.transpose(-2, -1)                        # no scale""",
    fixed="""\
scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])""",
    models=("gpt",),
    references=("https://github.com/mlc-ai/mlc-llm/pull/3426",),
    since="1.2",
    reproducers={"gpt": SetupDelta(
        setup=(("${LR}, 50, 64, 4\n", "${LR}, 50, 64, 1\n"),),  # the scenario's one head
        patch=(("scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)",
                "scores = q @ k.transpose(-2, -1)"),),
    )},
)
