"""``reviews``: a synthetic sentiment corpus for the sequence models.

A review is neutral filler with one to three sentiment phrases dropped in. A phrase is a
sentiment word, optionally preceded by a negation that flips it; every phrase agrees with the
label, so the label depends on content only. Lengths are uniform on [min_len, max_len]
independently of the label, so batches carry a lot of padding (id 0). ``pad_to`` pads every
batch to that fixed width (a tokenizer's ``padding="max_length"``) instead of to its longest
review. ``serve_pad_to`` declares how serving pads requests (``padding="max_length"`` at that
width) while training and validation batches stay padded to their longest review; the harness then
measures the trained model on the validation reviews padded both ways.
"""

from __future__ import annotations

import torch

from bugzoo.data.base import DataBundle, Split

PAD_ID = 0
POSITIVE = ("good great excellent superb lovely delightful brilliant wonderful enjoyable "
            "charming moving fresh clever solid fun").split()
NEGATIVE = ("bad awful terrible dull boring weak clumsy tedious bland messy painful "
            "lazy poor shallow ugly").split()
NEGATIONS = "not never hardly".split()
NUM_FILLER = 120  # neutral words: "the", "plot", "actor", ... as anonymous ids


def vocabulary() -> list[str]:
    """Token strings by id (id 0 is padding)."""
    filler = [f"w{i}" for i in range(NUM_FILLER)]
    return ["<pad>", *POSITIVE, *NEGATIVE, *NEGATIONS, *filler]


def make_reviews(seed: int = 0, n_train: int = 4000, n_val: int = 1000, n_holdout: int = 1000,
                 min_len: int = 4, max_len: int = 32, negation_rate: float = 0.15,
                 pad_to: int | None = None, serve_pad_to: int | None = None) -> DataBundle:
    g = torch.Generator().manual_seed(seed)
    vocab = vocabulary()
    index = {w: i for i, w in enumerate(vocab)}
    pos = torch.tensor([index[w] for w in POSITIVE])
    neg = torch.tensor([index[w] for w in NEGATIVE])
    negs = torch.tensor([index[w] for w in NEGATIONS])
    first_filler = index["w0"]

    n = n_train + n_val + n_holdout
    y = torch.randint(2, (n,), generator=g)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
    x = torch.full((n, max(max_len, pad_to or 0, serve_pad_to or 0)), PAD_ID, dtype=torch.long)
    for i in range(n):
        length = int(lengths[i])
        row = first_filler + torch.randint(NUM_FILLER, (length,), generator=g)
        phrases = int(torch.randint(1, 4, (1,), generator=g))
        used: set[int] = set()
        for at in torch.randperm(length, generator=g).tolist():
            if phrases == 0:
                break
            negated = bool(torch.rand(1, generator=g) < negation_rate) and at > 0
            span = {at - 1, at} if negated else {at}
            if span & used or (at + 1) in used:
                continue
            used |= span
            phrases -= 1
            # A negated phrase uses the opposite word so that it still agrees with the label.
            words = pos if (int(y[i]) == 1) != negated else neg
            row[at] = words[torch.randint(len(words), (1,), generator=g)]
            if negated:
                row[at - 1] = negs[torch.randint(len(negs), (1,), generator=g)]
        x[i, :length] = row
    cut1, cut2 = n_train, n_train + n_val
    return DataBundle(
        name="reviews",
        num_classes=2,
        train=Split(x[:cut1], y[:cut1], lengths[:cut1], pad_to),
        val=Split(x[cut1:cut2], y[cut1:cut2], lengths[cut1:cut2], pad_to),
        holdout=Split(x[cut2:], y[cut2:], lengths[cut2:], pad_to),
        pad_id=PAD_ID,
        serve_pad_to=serve_pad_to,
        vocab_size=len(vocab),
        info={"max_len": max_len},
    )
