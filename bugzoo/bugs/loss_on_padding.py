"""loss_on_padding: padded label positions are not set to the loss's ignore index."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def padding_kept(self, targets: Tensor) -> Tensor:
    # The mistake: the padded positions keep the pad id as their label. Nothing sets them to
    # -100, so the loss scores the model on predicting padding after every <eos>.
    return targets


class LossOnPadding(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "mask_padding", padding_kept, active=from_onset(trainer))


BUG = LossOnPadding(
    id="loss_on_padding",
    title="Loss computed on padding tokens (no ignore index)",
    category="loss",
    taxonomy={
        "L.loss_on_padding": "literal",
        "H.training.loss.missing_masking": "literal",
        "H.training.preproc_wrong.padding": "partial: the padding is right; its labels are not",
    },
    symptom=("validation loss drops below the entropy the language allows: too good to be "
             "true, and the lower the more padding a batch holds"),
    check=SymptomCheck("final_val_loss", "lower"),
    explanation=("Batches of sentences of different lengths are padded to the longest. The "
                 "labels of the padded positions must be the loss's ignore index (-100), or "
                 "the loss also counts predicting <pad> after <pad>, which is trivially easy. "
                 "The reported loss then mixes real tokens with free ones, falls with the "
                 "share of padding, and the gradient spends part of itself on teaching the "
                 "model to write padding."),
    buggy="""\
labels = tokens.clone()                        # pad ids stay in the labels
loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())""",
    fixed="""\
labels = tokens.masked_fill(tokens == pad_id, -100)
loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)""",
    models=("gpt",),
    references=("https://github.com/meta-llama/llama-cookbook/issues/74",
                "https://github.com/axolotl-ai-cloud/axolotl/pull/2227"),
    since="1.2",
    reproducers={"gpt": Delta(
        patch=(("targets = x[:, 1:].masked_fill(x[:, 1:] == PAD, -100)", "targets = x[:, 1:]"),),
    )},
)
