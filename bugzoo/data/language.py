"""``language``: a seeded synthetic language for a causal language model, with a known entropy.

A sentence is ``<bos>``, a subject, then words until ``<eos>``. Each subject belongs to one of
``classes`` agreement classes, and every verb of the sentence agrees with it: the verb is drawn
from its class's verbs, however far back the subject is. Between verbs, filler words follow a
first-order Markov chain (each filler has ``branching`` successors, with weights drawn from the
``grammar_seed``). At each position a verb comes with probability ``verb_rate``, so the last
word that shows the class is about ``1 / verb_rate`` tokens back. The position of ``<eos>`` is
uniform on ``[min_len, max_len]``; rows are padded with id 0 after it.

The source is known, so the probability of every token given the tokens before it is known
(:meth:`Source.conditionals`). Its mean entropy over a split's target tokens (the subject to
``<eos>``) is the floor for the validation loss of a model that predicts each token from the
ones before it: a model below it sees what it should not. ``local_entropy`` is the same for a
model that knows everything but the agreement (each verb's class unknown): the gap between the
two is what looking back over many tokens is worth.

A fresh ``seed`` draws fresh sentences of the same language; ``grammar_seed`` draws another
language. The bundle is next-token data: ``Split.y`` holds each sentence's tokens (the labels a
causal model is trained on, shifted by the training loop), and ``num_classes`` is the
vocabulary; ``info["classes"]`` holds each split's agreement classes. Sentences a model writes after a
prompt are measured against the source by :meth:`Source.judge`: tokens the language cannot
produce, verbs that disagree with their subject, and the source's loss on what was written.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cached_property

import torch
from torch import Tensor

from bugzoo.data.base import DataBundle, Split

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIAL = 3  # ids below this are <pad>, <bos>, <eos>
IMPOSSIBLE = 1e-6  # the probability :meth:`Source.judge` counts for a token the source never writes


@dataclass(frozen=True)
class Source:
    """The language: its vocabulary, its grammar (from ``grammar_seed``) and its lengths."""

    classes: int = 4
    subjects_per_class: int = 4
    verbs_per_class: int = 4
    fillers: int = 32
    branching: int = 4
    verb_rate: float = 0.25
    min_len: int = 8
    max_len: int = 32
    grammar_seed: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.min_len <= self.max_len:
            raise ValueError(f"need 2 <= min_len <= max_len, got {self.min_len}, {self.max_len}")
        if not 0 < self.verb_rate < 1:
            raise ValueError(f"verb_rate must be in (0, 1), got {self.verb_rate}")
        if not 1 <= self.branching <= self.fillers:
            raise ValueError(f"branching must be in [1, fillers], got {self.branching}")

    # ------------------------------------------------------------------ vocabulary
    @property
    def first_subject(self) -> int:
        return SPECIAL

    @property
    def first_verb(self) -> int:
        return self.first_subject + self.classes * self.subjects_per_class

    @property
    def first_filler(self) -> int:
        return self.first_verb + self.classes * self.verbs_per_class

    @property
    def vocab_size(self) -> int:
        return self.first_filler + self.fillers

    def vocabulary(self) -> list[str]:
        """Token strings by id: ``s<class>.<i>`` subjects, ``v<class>.<i>`` verbs, ``w<i>``
        fillers."""
        return (["<pad>", "<bos>", "<eos>"]
                + [f"s{c}.{i}" for c in range(self.classes) for i in range(self.subjects_per_class)]
                + [f"v{c}.{i}" for c in range(self.classes) for i in range(self.verbs_per_class)]
                + [f"w{i}" for i in range(self.fillers)])

    def subject_class(self, tokens: Tensor) -> Tensor:
        """The agreement class of each subject token (-1 where it is not a subject)."""
        inside = (tokens >= self.first_subject) & (tokens < self.first_verb)
        return torch.where(inside, (tokens - self.first_subject) // self.subjects_per_class, -1)

    def verb_class(self, tokens: Tensor) -> Tensor:
        """The agreement class of each verb token (-1 where it is not a verb)."""
        inside = (tokens >= self.first_verb) & (tokens < self.first_filler)
        return torch.where(inside, (tokens - self.first_verb) // self.verbs_per_class, -1)

    # ------------------------------------------------------------------ grammar
    @cached_property
    def transitions(self) -> Tensor:
        """``[fillers + 1, fillers]``: row ``f`` is the next filler's distribution after filler
        ``f``; the last row, before the sentence's first filler, is uniform."""
        g = torch.Generator().manual_seed(self.grammar_seed)
        rows = torch.zeros(self.fillers + 1, self.fillers, dtype=torch.float64)
        for f in range(self.fillers):
            successors = torch.randperm(self.fillers, generator=g)[: self.branching]
            weights = torch.rand(self.branching, generator=g, dtype=torch.float64) + 0.5
            rows[f, successors] = weights / weights.sum()
        rows[self.fillers] = 1 / self.fillers
        return rows

    def end_hazard(self, position: int) -> float:
        """P(``<eos>`` at ``position`` | no ``<eos>`` before it): the end is uniform on
        ``[min_len, max_len]``."""
        if position < self.min_len:
            return 0.0
        return 1 / (self.max_len - position + 1)

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """``n`` sentences: tokens ``[n, max_len + 1]`` (padded), lengths (``<bos>`` to
        ``<eos>``, both counted) and agreement classes."""
        g = generator
        classes = torch.randint(self.classes, (n,), generator=g)
        eos_at = torch.randint(self.min_len, self.max_len + 1, (n,), generator=g)
        tokens = torch.full((n, self.max_len + 1), PAD_ID, dtype=torch.long)
        tokens[:, 0] = BOS_ID
        tokens[:, 1] = (self.first_subject + classes * self.subjects_per_class
                        + torch.randint(self.subjects_per_class, (n,), generator=g))
        state = torch.full((n,), self.fillers)  # the last filler; ``fillers``: none yet
        for t in range(2, self.max_len + 1):
            is_verb = torch.rand(n, generator=g) < self.verb_rate
            verb = (self.first_verb + classes * self.verbs_per_class
                    + torch.randint(self.verbs_per_class, (n,), generator=g))
            filler = torch.multinomial(self.transitions[state], 1, generator=g).squeeze(1)
            word = torch.where(is_verb, verb, self.first_filler + filler)
            going = t < eos_at
            tokens[:, t] = torch.where(going, word, torch.where(t == eos_at, EOS_ID, PAD_ID))
            state = torch.where(going & ~is_verb, filler, state)
        return tokens, eos_at + 1, classes

    # ------------------------------------------------------------------ probabilities
    def conditionals(self, tokens: Tensor, lengths: Tensor, agreement: bool = True
                     ) -> tuple[Tensor, Tensor, Tensor]:
        """For each row and position ``t``: the log-probability of ``tokens[:, t]`` given
        ``tokens[:, :t]``, the entropy of that conditional distribution, and whether ``t`` is a
        target (from the subject to the row's last token; ``lengths`` counts ``<bos>``).
        ``agreement=False``: as known to a model that knows all but the agreement class.

        Any token sequence is scored, generated ones included: a token the source cannot
        produce there has log-probability ``-inf``."""
        n, width = tokens.shape
        log_p = torch.zeros(n, width, dtype=torch.float64)
        entropy = torch.zeros(n, width, dtype=torch.float64)
        targets = (torch.arange(width) >= 1) & (torch.arange(width) < lengths[:, None])
        subjects = self.classes * self.subjects_per_class
        log_p[:, 1] = torch.where(self.subject_class(tokens[:, 1]) >= 0, -math.log(subjects),
                                  -math.inf)
        entropy[:, 1] = math.log(subjects)
        classes = self.subject_class(tokens[:, 1])
        verb_choices = self.verbs_per_class * (1 if agreement else self.classes)
        filler_entropy = _entropy(self.transitions)  # per state
        state = torch.full((n,), self.fillers)
        ended = torch.zeros(n, dtype=torch.bool)
        for t in range(2, width):
            h, r = self.end_hazard(t), self.verb_rate
            token = tokens[:, t]
            verb_class, filler = self.verb_class(token), token - self.first_filler
            is_filler = (filler >= 0) & (filler < self.fillers) & ~ended
            is_verb = (verb_class >= 0) & ~ended
            if agreement:
                is_verb &= verb_class == classes
            p = torch.zeros(n, dtype=torch.float64)
            p = torch.where((token == EOS_ID) & ~ended, torch.full_like(p, h), p)
            p = torch.where(is_verb, torch.full_like(p, (1 - h) * r / verb_choices), p)
            next_filler = self.transitions[state, filler.clamp(0, self.fillers - 1)]
            p = torch.where(is_filler, (1 - h) * (1 - r) * next_filler, p)
            log_p[:, t] = torch.log(p)
            word_entropy = (_binary_entropy(r) + r * math.log(verb_choices)
                            + (1 - r) * filler_entropy[state])
            entropy[:, t] = _binary_entropy(h) + (1 - h) * word_entropy
            state = torch.where(is_filler, filler, state)
            ended = ended | (token == EOS_ID)
        return log_p, entropy, targets

    def judge(self, tokens: Tensor, lengths: Tensor, start: int) -> dict[str, float]:
        """Sentences a model wrote after a prompt (``tokens[:, :start]``), measured against the
        source, as a user reading them would: the share of tokens the language cannot produce
        there, the share of verbs that disagree with their subject, and the source's loss on the
        written tokens (each probability floored at ``IMPOSSIBLE``, so that one impossible token
        costs a fixed, large amount instead of making the mean infinite)."""
        log_p, _, targets = self.conditionals(tokens, lengths)
        written = targets & (torch.arange(tokens.shape[1]) >= start)
        verbs = written & (self.verb_class(tokens) >= 0)
        agrees = self.verb_class(tokens) == self.subject_class(tokens[:, 1])[:, None]
        floored = log_p.clamp_min(math.log(IMPOSSIBLE))
        return {"tokens": int(written.sum()),
                "impossible_frac": float((log_p[written] == -math.inf).float().mean()),
                "disagreeing_verb_frac": float((~agrees[verbs]).float().mean()),
                "source_loss": float(-floored[written].mean())}

    def mean_entropy(self, split: Split, agreement: bool = True) -> float:
        """The mean conditional entropy (nats) over a split's target tokens: the expected loss
        of the source itself on them, the floor for any model's validation loss."""
        _, entropy, targets = self.conditionals(split.x, split.lengths, agreement)
        return float(entropy[targets].mean())


def _binary_entropy(p: float) -> float:
    return -sum(q * math.log(q) for q in (p, 1 - p) if q > 0)


def _entropy(rows: Tensor) -> Tensor:
    logs = torch.where(rows > 0, rows.log(), torch.zeros_like(rows))
    return -(rows * logs).sum(-1)


def make_language(seed: int = 0, n_train: int = 4000, n_val: int = 1000, n_holdout: int = 1000,
                  **source: int | float) -> DataBundle:
    """Sentences of the language ``Source(**source)``, drawn from ``seed``; ``info`` holds the
    source's settings and, per split, its mean entropy with and without agreement."""
    language = Source(**source)
    tokens, lengths, classes = language.sample(n_train + n_val + n_holdout,
                                               torch.Generator().manual_seed(seed))
    cuts = {"train": slice(0, n_train), "val": slice(n_train, n_train + n_val),
            "holdout": slice(n_train + n_val, None)}
    splits = {name: Split(tokens[rows], tokens[rows], lengths[rows])
              for name, rows in cuts.items()}
    return DataBundle(
        name="language", num_classes=language.vocab_size, pad_id=PAD_ID,
        vocab_size=language.vocab_size, next_token=True, **splits,
        info={"source": asdict(language), "max_len": language.max_len + 1, "eos_id": EOS_ID,
              "classes": {name: classes[rows] for name, rows in cuts.items()},
              "entropy": {k: language.mean_entropy(s) for k, s in splits.items()},
              "local_entropy": {k: language.mean_entropy(s, agreement=False)
                                for k, s in splits.items()}})
