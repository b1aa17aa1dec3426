"""truncated_sequences: every review is cut to its first few tokens before training."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.data.base import Split


def truncate(split: Split, max_tokens: int) -> Split:
    return Split(split.x[:, :max_tokens].clone(), split.y, split.lengths.clamp(max=max_tokens))


class TruncatedSequences(Bug):
    def before_build(self, trainer) -> None:
        max_tokens = int(trainer.cfg.bug.params.max_tokens)
        load = trainer.load_data

        def tokenize_truncated(self) -> DataBundle:
            # The mistake: the tokenizer's max_length is a few tokens (a units slip: words
            # vs. characters, or a debugging value left in), so the pipeline keeps only the
            # start of each review. The holdout set is still read in full.
            data = load()
            return data.with_splits(train=truncate(data.train, max_tokens),
                                    val=truncate(data.val, max_tokens))

        patch_method(trainer, "load_data", tokenize_truncated)


BUG = TruncatedSequences(
    id="truncated_sequences",
    title="Input sequences truncated to a few tokens",
    category="data",
    taxonomy={
        "H.training.preproc_wrong.text_segmentation":
            "partial: the tokenizer is set to cut, not to split wrongly",
        "H.training.data.discarding_features": "partial: the tokens past the cut are dropped",
    },
    honours_onset=False,
    symptom=("the model only sees the first tokens of each review, where the sentiment words often "
             "are not: validation accuracy plateaus well below the clean run"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A max_length set far too small silently truncates every input. Nothing "
                 "crashes and the loss still falls a little, but most of the evidence is cut "
                 "away, so accuracy plateaus low."),
    buggy="""\
batch = tokenizer(texts, truncation=True, max_length=4, padding=True)""",
    fixed="""\
batch = tokenizer(texts, truncation=True, max_length=32, padding=True)""",
    models=("lstm", "transformer", "gpt"),
    params={
        "max_tokens": 4,  # tokens kept per review
    },
    reproducers={**dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(("make_split(${N_VAL}), make_split(500)\n",
                "make_split(${N_VAL}), make_split(500)\n"
                "train, val = ((x[:, :4], lengths.clamp(max=4), y)\n"
                "              for x, lengths, y in (train, val))\n"),),
    )), "gpt": Delta(
        # a sentence's targets are its next tokens, so they are cut with it
        patch=(("make_split(${N_VAL}), make_split(500)\n",
                "make_split(${N_VAL}), make_split(500)\n"
                "train, val = ((x[:, :4], y[:, :4]) for x, y in (train, val))\n"),),
    )},
)
