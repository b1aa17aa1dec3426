"""mask_after_softmax: attention zeroes padded keys after the softmax instead of before it."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, Symptom, patch_method
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
                             active=lambda: trainer.step >= trainer.onset)


BUG = MaskAfterSoftmax(
    id="mask_after_softmax",
    title="Attention padding mask applied after softmax",
    category="model",
    symptom=Symptom("final_val_acc", "lower",
                    "training still converges, but each row's attention mass depends on the "
                    "batch's padding; validation accuracy is expected to end below the clean "
                    "run's, though on this mini encoder the drop is within seed noise"),
    explanation=("A key-padding mask must set padded scores to -inf before the softmax so the "
                 "weights over the real tokens sum to 1. Multiplying the probabilities by the "
                 "mask afterwards removes the padded keys' weight without renormalising: each "
                 "row's total attention shrinks with the amount of padding in the batch (which "
                 "depends on the longest sequence in it), and the padded positions' embeddings "
                 "still enter the denominator. The same review gets a different representation "
                 "depending on its batch-mates and its own length. Measured on the mini "
                 "encoder here (CPU, 150 steps): the model largely compensates, and final "
                 "validation accuracy stays within seed noise of the clean run's (0.865/0.845 "
                 "vs 0.867/0.838 for seeds 0/1; with lengths 2-64 0.845 vs 0.823; evaluated one "
                 "review at a time, without padding, 0.857 vs 0.867)."),
    buggy="""\
weights = scores.softmax(dim=-1)
weights = weights * (~key_padding)            # mask after softmax""",
    fixed="""\
scores = scores.masked_fill(key_padding, float("-inf"))
weights = scores.softmax(dim=-1)              # mask before softmax""",
    models=("transformer",),
)
