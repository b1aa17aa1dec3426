"""rnn_time_major_view: the LSTM encoder makes its batch-first embeddings time-major with
.view(T, B, E) instead of .transpose(0, 1), scrambling tokens across reviews."""

from __future__ import annotations

from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def encode_time_major_view(self, tokens: Tensor, lengths: Tensor) -> Tensor:
    # The mistake: the encoder is written time-major, and the [B, T, E] embeddings are
    # reshaped to [T, B, E] with view, which keeps the memory order: "time step t of review b"
    # is really element t*B + b of the flattened batch, a token from some other review.
    embedded = self.embedding(tokens)
    b, t, e = embedded.shape
    packed = pack_padded_sequence(embedded.view(t, b, e), lengths.cpu(), batch_first=False,
                                  enforce_sorted=False)
    _, (h_n, _) = self.lstm(packed)
    return h_n[-1]


class RnnTimeMajorView(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.backbone, "forward", encode_time_major_view,
                     active=from_onset(trainer))


BUG = RnnTimeMajorView(
    id="rnn_time_major_view",
    title="view(T, B, E) instead of transpose(0, 1) for a time-major RNN",
    category="model",
    taxonomy={
        "H.tensors.input.wrong_format_rnn": "literal",
        "J.IWF": "literal",
        "J.TWS": "partial: the shape is right ([T, B, E]); the layout inside it is wrong",
    },
    symptom=("no error, but the training loss hardly moves from log(2): each sequence the model "
             "reads is a mix of words from several reviews, and validation accuracy stays near "
             "chance"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("view reinterprets memory without moving it. A contiguous batch-first tensor "
                 "[B, T, E] viewed as [T, B, E] has the right shape for a time-major RNN, but "
                 "position (t, b) holds the token at flat index t*B + b: consecutive rows of "
                 "one review become one time step across the batch. Each sequence the LSTM "
                 "reads stitches together pieces of other reviews (and their padding), so the "
                 "summary for a review carries little of its own words (and which words depends "
                 "on the batch size, so evaluation batches mix differently again). "
                 "transpose(0, 1) (or batch_first=True) moves the axes correctly."),
    buggy="""\
x = self.embedding(tokens)                        # [B, T, E]
x = x.view(x.size(1), x.size(0), -1)              # [T, B, E]
packed = pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False)
_, (h_n, _) = self.lstm(packed)                   # nn.LSTM(batch_first=False)""",
    fixed="""\
x = self.embedding(tokens)                        # [B, T, E]
x = x.transpose(0, 1)                             # [T, B, E]
packed = pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False)
_, (h_n, _) = self.lstm(packed)                   # nn.LSTM(batch_first=False)""",
    models=("lstm",),
    inapplicable={"gpt": "a time-major LSTM's input layout: the causal LM has no RNN"},
    since="1.1",
    reproducers={"lstm": Delta(
        patch=(("        packed = pack_padded_sequence(self.embedding(tokens), lengths, "
                "batch_first=True,\n"
                "                                      enforce_sorted=False)\n",
                "        embedded = self.embedding(tokens)\n"
                "        b, t, e = embedded.shape\n"
                "        packed = pack_padded_sequence(embedded.view(t, b, e), lengths, "
                "batch_first=False,\n"
                "                                      enforce_sorted=False)\n"),),
    )},
)
