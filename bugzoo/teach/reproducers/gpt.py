"""The causal LM reproducer: sentences of a small synthetic language whose verbs agree with their
subject however far back it is, a two-block decoder-only transformer with causal attention and
an output head tied to its embedding, next-token loss over the real tokens, AdamW with warm-up.

A split is (tokens, targets): ``targets`` is each row's next token, -100 where the row is padded
(``F.cross_entropy`` ignores it); accuracy counts the real target tokens only."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs import Delta
from bugzoo.teach.reproducers._shared import ADAMW, CLIP1, HEADER, TRAIN

DEFAULTS: dict[str, object] = {"STEPS": 300, "LR": 3e-3, "N_TRAIN": 2000, "N_VAL": 300}

GROUPS, FILLERS, MAX_LEN = 4, 24, 24
SUBJECT, VERB, FILLER = 3, 3 + 4 * GROUPS, 3 + 8 * GROUPS  # the first id of each kind of word
PAD, BOS, EOS, IGNORE = 0, 1, 2, -100

TEMPLATE = HEADER + '''
torch.manual_seed(0)
STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, 32, ${LR}, 50, 64, 4
PAD, BOS, EOS, GROUPS, FILLERS, MAX_LEN = 0, 1, 2, 4, 24, 24
SUBJECT, VERB, FILLER = 3, 3 + 4 * GROUPS, 3 + 8 * GROUPS  # the first id of each kind of word
VOCAB = FILLER + FILLERS
# which filler follows which (a few likely ones): one language for every seed, since its
# entropy is the floor of the loss, and each seed draws its own sentences from it
grammar = torch.rand(FILLERS, FILLERS, generator=torch.Generator().manual_seed(0)) ** 16


def make_split(n):
    """<bos>, a subject of one of 4 groups, then words until <eos>: each word is a verb of the
    subject's group with probability 1/4, otherwise the filler the chain moves to next."""
    group = torch.randint(0, GROUPS, (n,))
    ends = torch.randint(6, MAX_LEN, (n,))  # where <eos> goes
    x = torch.full((n, MAX_LEN + 1), PAD)
    x[:, 0], x[:, 1] = BOS, SUBJECT + 4 * group + torch.randint(0, 4, (n,))
    filler = torch.randint(0, FILLERS, (n,))
    for t in range(2, MAX_LEN + 1):
        verb = torch.rand(n) < 0.25
        filler = torch.where(verb, filler, torch.multinomial(grammar[filler], 1).squeeze(1))
        word = torch.where(verb, VERB + 4 * group + torch.randint(0, 4, (n,)), FILLER + filler)
        x[:, t] = torch.where(t < ends, word, torch.where(t == ends, EOS, PAD))
    targets = x[:, 1:].masked_fill(x[:, 1:] == PAD, -100)  # the next token; padding ignored
    return x[:, :-1], targets


train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)


class CausalAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // HEADS)
        future = torch.ones(s, s, dtype=torch.bool).triu(1)  # a token sees itself and before
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(DIM), CausalAttention(), nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(MAX_LEN, DIM)
        for table in (self.tokens, self.positions):  # GPT-2's init: the first loss is log(V)
            nn.init.normal_(table.weight, std=0.02)
        self.blocks = nn.Sequential(Block(), Block())
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.tokens.weight  # tied to the embedding, as GPT-2's

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1]))
        return self.head(self.norm(self.blocks(x)))  # [B, S, VOCAB]: each next token's logits


model = GPT()
''' + ADAMW + '''

def loss_fn(logits, y):
    return F.cross_entropy(logits.transpose(1, 2), y)  # [B, VOCAB, S] against [B, S]


def evaluate(split):
    *inputs, y = split
    model.eval()
    with torch.no_grad():
        logits = model(*inputs)
        real = y != -100
        result = (F.cross_entropy(logits.transpose(1, 2), y).item(),
                  (logits.argmax(-1) == y)[real].float().mean().item())
    model.train()
    return result
''' + TRAIN

# Healthy variants of the fixed script
SIZES = "STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, 32, ${LR}, 50, 64, 4"
HEALTHY: dict[str, Delta] = {
    "batch64": Delta(((SIZES, SIZES.replace("${STEPS}, 32", "${STEPS}, 64")),)),
    "clip1": CLIP1,
    "wide": Delta(((SIZES, SIZES.replace("50, 64, 4", "50, 96, 4")),)),
}

# The task's view of the template (bugzoo.teach.tasks): see the mlp's. The grader measures the
# next-token loss and accuracy over the real target tokens, so a model's classes are its
# vocabulary.
DESCRIPTION = ("a small decoder-only transformer that learns a synthetic language (sentences "
               "whose verbs agree with their subject) by predicting each next word")
SOURCE, CLASSES = "grammar", FILLER + FILLERS


def data_source(seed: int, settings: dict) -> Tensor:
    """The filler chain of the template's language (``grammar``), the same whatever the seed: a
    language model's loss ends near its language's entropy, so a language drawn per seed would
    spread the seeds' losses by more than many mistakes cost (as the catalogue's ``language``
    dataset keeps one ``grammar_seed``)."""
    return torch.rand(FILLERS, FILLERS, generator=torch.Generator().manual_seed(0)) ** 16


def fresh_split(grammar: Tensor, n: int, seed: int, settings: dict
                ) -> tuple[tuple[Tensor], Tensor]:
    """``n`` new sentences drawn as the template's ``make_split`` draws them, from a generator
    seeded ``seed``: the model's tokens and the next-token targets (-100 where padded)."""
    g = torch.Generator().manual_seed(seed)
    group = torch.randint(0, GROUPS, (n,), generator=g)
    ends = torch.randint(6, MAX_LEN, (n,), generator=g)
    x = torch.full((n, MAX_LEN + 1), PAD)
    x[:, 0], x[:, 1] = BOS, SUBJECT + 4 * group + torch.randint(0, 4, (n,), generator=g)
    filler = torch.randint(0, FILLERS, (n,), generator=g)
    for t in range(2, MAX_LEN + 1):
        verb = torch.rand(n, generator=g) < 0.25
        step = torch.multinomial(grammar[filler], 1, generator=g).squeeze(1)
        filler = torch.where(verb, filler, step)
        word = torch.where(verb, VERB + 4 * group + torch.randint(0, 4, (n,), generator=g),
                           FILLER + filler)
        x[:, t] = torch.where(t < ends, word, torch.where(t == ends, EOS, PAD))
    return (x[:, :-1],), x[:, 1:].masked_fill(x[:, 1:] == PAD, IGNORE)
