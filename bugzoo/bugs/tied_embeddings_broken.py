"""tied_embeddings_broken: the output head re-created after tying, re-initialised and untied."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_model_and_resize_head(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    # The mistake: the vocabulary is "resized" by building a new output head. The head was tied
    # to the input embedding; the new one is a fresh, default-initialised matrix of its own.
    model.head = nn.Linear(model.head.in_features, self.data.vocab_size, bias=False)
    return model


class TiedEmbeddingsBroken(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_model_and_resize_head)


BUG = TiedEmbeddingsBroken(
    id="tied_embeddings_broken",
    title="Tied embeddings broken: output head re-created after tying",
    category="model",
    taxonomy={
        "L.tied_embeddings_broken": "literal",
        "H.model.type.wrong_weights_init": "partial: the head re-initialised by a resize",
    },
    symptom=("the first loss starts above log(vocabulary), where an untrained language model's "
             "should be, and the model has more parameters than it should"),
    check=SymptomCheck("initial_loss", "higher"),
    explanation=("Tying makes the output projection and the input embedding one matrix. Code "
                 "that replaces the head after tying (a vocabulary resize that builds a new "
                 "Linear, a wrapper that re-creates modules) leaves two matrices: the head is "
                 "re-initialised with nn.Linear's default scale, far larger than the "
                 "embedding's, so the untrained model is confidently wrong, and from then on "
                 "the head and the embedding train apart."),
    buggy="""\
model.head.weight = model.tokens.weight         # tied
model.head = nn.Linear(dim, new_vocab_size, bias=False)     # resize: a new, untied head""",
    fixed="""\
model.head = nn.Linear(dim, new_vocab_size, bias=False)
model.head.weight = model.tokens.weight         # re-tie after every resize""",
    models=("gpt",),
    honours_onset=False,
    references=("https://github.com/huggingface/transformers/issues/35141",
                "https://github.com/huggingface/accelerate/issues/993"),
    since="1.2",
    reproducers={"gpt": Delta(
        patch=(("model = GPT()\n",
                "model = GPT()\nmodel.head = nn.Linear(DIM, VOCAB, bias=False)\n"),),
    )},
)
