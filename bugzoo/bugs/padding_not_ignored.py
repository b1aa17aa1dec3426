"""padding_not_ignored: the LSTM runs over padding and the last time step is taken."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def encode_padded(self, tokens: Tensor, lengths: Tensor) -> Tensor:
    # The mistake: no packing, and the output at the last position is used as the summary,
    # although for every shorter review that position (and those before it) is padding.
    out, _ = self.lstm(self.embedding(tokens))
    return out[:, -1]


class PaddingNotIgnored(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.backbone, "forward", encode_padded, active=from_onset(trainer))


BUG = PaddingNotIgnored(
    id="padding_not_ignored",
    title="LSTM reads padding: last time step instead of the final real state",
    category="model",
    taxonomy={
        "H.tensors.shape.wrong_indexing": "literal",
        "H.training.preproc_wrong.padding":
            "partial: the padding is right; the model reads through it",
    },
    symptom=("short reviews are summarised after many padding steps that wash out their content; "
             "validation accuracy ends below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Batches are right-padded to the longest review. Running the LSTM over the "
                 "padded tensor and taking output[:, -1] returns, for every shorter sequence, "
                 "the state after a run of pad tokens rather than after its last real token. "
                 "The model must learn to carry information through the padding, which it "
                 "does poorly; pack_padded_sequence (or gathering at length-1) avoids it."),
    buggy="""\
out, _ = self.lstm(self.embedding(tokens))
return out[:, -1]                                    # padding for short sequences""",
    fixed="""\
packed = pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True,
                              enforce_sorted=False)
_, (h_n, _) = self.lstm(packed)
return h_n[-1]                                       # state after the last real token""",
    models=("lstm",),
    inapplicable={"gpt": ("an LSTM reading through its padding: the causal LM masks padded keys "
                          "in attention (its padding bugs are loss_on_padding and "
                          "left_pad_positions)")},
    reproducers={"lstm": Delta(
        patch=(("        packed = pack_padded_sequence(self.embedding(tokens), lengths, "
                "batch_first=True,\n"
                "                                      enforce_sorted=False)\n"
                "        _, (h_n, _) = self.lstm(packed)\n"
                "        return h_n[-1]  # the state after each review's last real token\n",
                "        out, _ = self.lstm(self.embedding(tokens))\n"
                "        return out[:, -1]\n"),),
    )},
)
