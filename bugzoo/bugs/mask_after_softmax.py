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
                    "expected: each row's attention mass depends on the batch's padding, so "
                    "accuracy suffers; on this mini encoder it does not (see the explanation)"),
    explanation=("A key-padding mask must set padded scores to -inf before the softmax so the "
                 "weights over the real tokens sum to 1. Multiplying the probabilities by the "
                 "mask afterwards removes the padded keys' weight without renormalising: each "
                 "row's total attention shrinks with the amount of padding, and the padded "
                 "positions still enter the denominator, so a review's representation depends "
                 "on how much it was padded. Measured on the mini encoder here (CPU, "
                 "validation accuracy, buggy vs clean): the model learns to give padded keys "
                 "negligible scores, and the padding then acts as a harmless attention sink. "
                 "Padding every batch to a fixed 96 tokens (reviews 4-32), 150 steps, seeds "
                 "0/1: 0.860/0.845 vs 0.850/0.823. Training with per-batch padding and "
                 "evaluating padded to 96: 0.865/0.850 vs 0.845/0.825. Training padded to 96 "
                 "and evaluating padded to the longest review: 0.853/0.842 vs 0.850/0.823. "
                 "Default settings: 0.865/0.845 vs 0.867/0.838. Trained clean for 250 of 300 "
                 "steps, then the bug switched in (bug.onset=250, padded to 96): 0.875/0.877 "
                 "vs 0.873/0.877; the sentiment task is mostly bag-of-words, so attention has "
                 "little to lose. Twice as many negations (negation_rate=0.3, padded to 96, "
                 "300 steps, seeds 0/1/2), where attention matters more: 0.789/0.796/0.805 vs "
                 "0.783/0.768/0.775, so the sink even helps. The scenario is excluded from the "
                 "bench."),
    buggy="""\
weights = scores.softmax(dim=-1)
weights = weights * (~key_padding)            # mask after softmax""",
    fixed="""\
scores = scores.masked_fill(key_padding, float("-inf"))
weights = scores.softmax(dim=-1)              # mask before softmax""",
    models=("transformer",),
)
