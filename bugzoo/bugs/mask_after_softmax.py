"""mask_after_softmax: attention zeroes padded keys after the softmax instead of before it."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method
from bugzoo.models.transformer import SelfAttention


def attention_weights(self, scores: Tensor, key_padding: Tensor) -> Tensor:
    # The mistake: softmax over every key, padding included, then the padded keys are zeroed.
    # Rows no longer sum to 1 and the padding still shaped the denominator.
    return scores.softmax(dim=-1) * (~key_padding).to(scores.dtype)


class MaskAfterSoftmax(Bug):
    def after_build(self, trainer) -> None:
        for module in trainer.model.modules():
            if isinstance(module, SelfAttention):
                patch_method(module, "attention_weights", attention_weights,
                             active=from_onset(trainer))


BUG = MaskAfterSoftmax(
    id="mask_after_softmax",
    title="Attention padding mask applied after softmax",
    category="model",
    taxonomy={
        "H.training.preproc_wrong.padding":
            "partial: the padding is right; its mask is applied after the softmax",
        "H.training.loss.missing_masking":
            "partial: the mask comes too late in attention, not in a loss",
    },
    symptom=("accuracy degrades with more padding in the batch: the same validation reviews "
             "score worse when served padded to a fixed width (padding=\"max_length\") than when "
             "batched as in training; the clean model scores them identically"),
    check=SymptomCheck("serving_gap", "higher"),
    explanation=("A key-padding mask must set padded scores to -inf before the softmax so the "
                 "weights over the real tokens sum to 1. Multiplying the probabilities by the mask "
                 "afterwards removes the padded keys' weight without renormalising: each row's "
                 "total attention shrinks with the amount of padding, and the padded positions "
                 "still enter the denominator, so a review's representation depends on how much it "
                 "was padded. A model trained with the bug can learn to give padded keys negligible"
                 " scores, which hides it until the padding differs from what it trained on."),
    buggy="""\
weights = scores.softmax(dim=-1)
weights = weights * (~key_padding)            # mask after softmax""",
    fixed="""\
scores = scores.masked_fill(key_padding, float("-inf"))
weights = scores.softmax(dim=-1)              # mask before softmax""",
    models=("transformer",),
    inapplicable={"gpt": ("applies to a causal LM, but shows there as another symptom: "
                          "applied after the softmax, the causal mask leaves the future keys "
                          "in each row's normaliser, a look-ahead that drives validation loss "
                          "below the language's entropy, with a large generation gap (as "
                          "missing_causal_mask), while this card checks the serving gap across "
                          "padding widths; it waits for a symptom check per model")},
)
