"""The LSTM reproducer: synthetic reviews, an embedding and LSTM over the real tokens of each
review (packed), a linear sentiment head, AdamW with warm-up."""

from __future__ import annotations

from bugzoo.bugs import Delta
from bugzoo.teach.reproducers._shared import (
    CLIP1,
    HEADER,
    LOOP,
    OPTIMIZER,
    REVIEWS,
    fresh_reviews,
    review_lexicon,
)

DEFAULTS: dict[str, object] = {"STEPS": 400, "LR": 3e-3, "N_TRAIN": 4000, "N_VAL": 500,
                               "NEGATION": 0.15}

TEMPLATE = HEADER + '''from torch.nn.utils.rnn import pack_padded_sequence

torch.manual_seed(0)
STEPS, BATCH, LR, EVAL_EVERY = ${STEPS}, 64, ${LR}, 50
''' + REVIEWS + '''

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 32, padding_idx=0)
        self.lstm = nn.LSTM(32, 64, batch_first=True)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embedding(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        return h_n[-1]  # the state after each review's last real token


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Encoder()
        self.head = nn.Linear(64, 2)

    def forward(self, tokens, lengths):
        return self.head(self.backbone(tokens, lengths))


model = Classifier()
''' + OPTIMIZER + LOOP

# Healthy variants of the fixed script, named after the clean scenarios they mirror
# (scenarios/lstm-clean-<name>.yaml)
BATCH_LINE = "STEPS, BATCH, LR, EVAL_EVERY = ${STEPS}, 64,"
HIDDEN = (("nn.LSTM(32, 64, batch_first=True)", "nn.LSTM(32, {}, batch_first=True)"),
          ("nn.Linear(64, 2)", "nn.Linear({}, 2)"))
HEALTHY: dict[str, Delta] = {
    "batch128": Delta(((BATCH_LINE, BATCH_LINE.replace("64", "128")),)),
    "clip1": CLIP1,
    "narrow": Delta(tuple((old, new.format(16)) for old, new in HIDDEN)),
    "small_data": Delta((), {"N_TRAIN": 1000, "N_VAL": 300}),
    "wide": Delta(tuple((old, new.format(128)) for old, new in HIDDEN)),
}

# The task's view of the template (bugzoo.teach.tasks): see the mlp's
DESCRIPTION = ("an LSTM that reads synthetic product reviews (filler words and up to three "
               "sentiment phrases, some negated) and says whether each is positive or negative")
SOURCE, CLASSES = "lexicon", 2
data_source, fresh_split = review_lexicon, fresh_reviews
