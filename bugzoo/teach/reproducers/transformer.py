"""The transformer reproducer: synthetic reviews, a mini encoder whose attention masks the
padded keys before its softmax, a mean over the real tokens, AdamW with warm-up."""

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

DEFAULTS: dict[str, object] = {"STEPS": 400, "LR": 1e-2, "N_TRAIN": 4000, "N_VAL": 500,
                               "NEGATION": 0.15}

TEMPLATE = HEADER + '''
torch.manual_seed(0)
STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, 64, ${LR}, 50, 32, 2
''' + REVIEWS + '''

class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)

    def forward(self, x, padded):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)
        scores = scores.masked_fill(padded[:, None, None, :], float("-inf"))  # before softmax
        weights = scores.softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, s, d))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(DIM), SelfAttention(), nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, padded):
        x = x + self.dropout(self.attn(self.norm1(x), padded))
        return x + self.dropout(self.mlp(self.norm2(x)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.positions = nn.Embedding(MAX_LEN, DIM)
        self.layers = nn.ModuleList(Layer() for _ in range(2))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, tokens, lengths):
        padded = tokens == 0
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1]))
        for layer in self.layers:
            x = layer(x, padded)
        keep = (~padded).unsqueeze(-1).float()
        return self.norm((x * keep).sum(1) / keep.sum(1))  # the mean over real tokens


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Encoder()
        self.head = nn.Linear(DIM, 2)

    def forward(self, tokens, lengths):
        return self.head(self.backbone(tokens, lengths))


model = Classifier()
''' + OPTIMIZER + LOOP

# Healthy variants of the fixed script, named after the clean scenarios they mirror
# (scenarios/transformer-clean-<name>.yaml)
SIZES = "STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, 64, ${LR}, 50, 32, 2"
HEALTHY: dict[str, Delta] = {
    "batch128": Delta(((SIZES, SIZES.replace("${STEPS}, 64", "${STEPS}, 128")),)),
    "clip1": CLIP1,
    "dropout03": Delta((("nn.Dropout(0.1)", "nn.Dropout(0.3)"),)),
    "wide": Delta(((SIZES, SIZES.replace("50, 32, 2", "50, 64, 2")),)),
}

# The task's view of the template (bugzoo.teach.tasks): see the mlp's
DESCRIPTION = ("a 2-layer transformer encoder, masking the padded words, that reads synthetic "
               "product reviews (filler words and up to three sentiment phrases, some negated) and "
               "says whether each is positive or negative")
SOURCE, CLASSES = "lexicon", 2
data_source, fresh_split = review_lexicon, fresh_reviews
