"""heads_merged_without_transpose: self-attention merges its per-head outputs with
reshape(b, s, d) without the transpose(1, 2), mixing heads and positions."""

from __future__ import annotations

import math

from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method
from bugzoo.models.transformer import SelfAttention


def attend_merged_without_transpose(self, x: Tensor, key_padding: Tensor) -> Tensor:
    b, s, d = x.shape
    q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
    weights = self.attention_weights(scores, key_padding[:, None, None, :])
    # The mistake: weights @ v is [b, heads, s, d/heads]; reshaping it straight to [b, s, d]
    # without .transpose(1, 2) lays head 0's positions over the first rows, head 1's over the
    # next ones: output position i gets the outputs of other positions, from one head.
    return self.out((weights @ v).reshape(b, s, d))


class HeadsMergedWithoutTranspose(Bug):
    def after_build(self, trainer) -> None:
        for module in trainer.model.modules():
            if isinstance(module, SelfAttention):
                patch_method(module, "forward", attend_merged_without_transpose,
                             active=from_onset(trainer))


BUG = HeadsMergedWithoutTranspose(
    id="heads_merged_without_transpose",
    title="Attention heads merged with reshape, without transpose(1, 2)",
    category="model",
    taxonomy={
        "H.tensors.shape.other": "literal",
        "J.TWS": "literal",
    },
    symptom=("shapes all check out and the model trains almost normally, but it learns a little "
             "less than it should: validation accuracy ends slightly below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Multi-head attention computes per-head outputs of shape [B, H, S, D/H]. "
                 "Merging the heads needs transpose(1, 2) to [B, S, H, D/H] before reshaping to "
                 "[B, S, D]. Reshaping directly keeps the memory order, so the row for position "
                 "i holds consecutive positions of a single head: attention outputs land on the "
                 "wrong tokens (real tokens receive what padding positions computed and the "
                 "reverse) and the heads are never combined per position. The shapes are right, "
                 "so nothing complains."),
    buggy="""\
out = weights @ v                                  # [B, H, S, D/H]
return self.out(out.reshape(b, s, d))""",
    fixed="""\
out = weights @ v                                  # [B, H, S, D/H]
return self.out(out.transpose(1, 2).reshape(b, s, d))""",
    models=("transformer",),
    inapplicable={"gpt": ("applies to a causal LM, but shows there as another symptom: "
                          "merging heads without the transpose hands each position outputs "
                          "computed at later positions, a look-ahead that drives validation "
                          "loss below the language's entropy and accuracy up, with a large "
                          "generation gap (as missing_causal_mask), while this card checks "
                          "accuracy lower; it waits for a symptom check per model")},
    since="1.1",
    reproducers={"transformer": Delta(
        patch=(("return self.out((weights @ v).transpose(1, 2).reshape(b, s, d))",
                "return self.out((weights @ v).reshape(b, s, d))"),),
    )},
)
