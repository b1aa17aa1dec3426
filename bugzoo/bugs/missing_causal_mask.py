"""missing_causal_mask: the decoder's attention masks padding but not the future."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method
from bugzoo.models.gpt import CausalSelfAttention


def allowed_without_causal_mask(self, key_padding: Tensor) -> Tensor:
    # The mistake: only padded keys are masked. Nothing stops position i from attending to the
    # tokens after it, the very tokens it is trained to predict.
    s = key_padding.shape[1]
    itself = torch.eye(s, dtype=torch.bool, device=key_padding.device)
    return ~key_padding[:, None, None, :] | itself


class MissingCausalMask(Bug):
    def after_build(self, trainer) -> None:
        for module in trainer.model.modules():
            if isinstance(module, CausalSelfAttention):
                patch_method(module, "allowed", allowed_without_causal_mask,
                             active=from_onset(trainer))


BUG = MissingCausalMask(
    id="missing_causal_mask",
    title="Decoder self-attention without the causal mask",
    category="model",
    taxonomy={
        "L.missing_causal_mask": "literal",
        "H.training.loss.missing_masking": "partial: the mask is missing in attention, not a loss",
    },
    symptom=("training and validation loss fall far below what the language allows (below the "
             "source's entropy: too good to be true), yet the model writes nonsense: sentences it "
             "generates one token at a time score far worse than its validation loss promised"),
    check=SymptomCheck("generation_gap", "higher"),
    explanation=("A causal language model predicts token t+1 from tokens 0..t, so the attention "
                 "of position t must not reach positions after t. Without the causal mask, "
                 "teacher forcing hands every position the next token itself: the model learns "
                 "to read it off instead of predicting it, and the loss collapses. At generation "
                 "the future does not exist yet, the shortcut it learned has nothing to read, "
                 "and what it writes is garbage."),
    buggy="""\
allowed = ~key_padding[:, None, None, :]            # padding masked, the future is not
scores = scores.masked_fill(~allowed, float("-inf"))""",
    fixed="""\
causal = torch.ones(s, s, dtype=torch.bool).tril()  # key j <= query i
allowed = causal & ~key_padding[:, None, None, :]
scores = scores.masked_fill(~allowed, float("-inf"))""",
    models=("gpt",),
    references=("https://github.com/huggingface/transformers/issues/48745",),
    since="1.2",
)
