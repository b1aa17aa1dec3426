"""labels_not_shifted: a causal LM's logits at position t are scored against token t."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def labels_as_they_are(self, labels: Tensor) -> Tensor:
    # The mistake: the labels are the input tokens, used unshifted. Position t is scored against
    # its own token, which it can see, instead of the next one.
    return labels


class LabelsNotShifted(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "shift_labels", labels_as_they_are, active=from_onset(trainer))


BUG = LabelsNotShifted(
    id="labels_not_shifted",
    title="Language-model labels not shifted: each token predicts itself",
    category="loss",
    taxonomy={
        "L.labels_not_shifted": "literal",
        "H.training.loss.wrong_calculation": "literal",
    },
    symptom=("training and validation loss fall towards zero, far below the entropy the "
             "language allows; the model repeats what it is given instead of continuing it"),
    check=SymptomCheck("final_val_loss", "lower"),
    explanation=("A causal LM's labels are its input ids, and the loss must compare the logits at "
                 "position t with the token at t+1 (logits[:, :-1] against labels[:, 1:], or "
                 "a loop that shifts the labels). Unshifted, each position is asked for a token "
                 "its own input already holds, and the causal mask lets it see that token: the "
                 "model learns to copy. The loss looks superb; generation is useless."),
    buggy="""\
logits = model(tokens)
loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())      # labels = tokens""",
    fixed="""\
logits = model(tokens)
targets = torch.cat([labels[:, 1:], ignore_column], dim=1)         # token t + 1
loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)""",
    models=("gpt",),
    references=("https://github.com/huggingface/transformers/issues/27517",),
    since="1.2",
    reproducers={"gpt": Delta(
        patch=(("targets = x[:, 1:].masked_fill(x[:, 1:] == PAD, -100)",
                "targets = x[:, :-1].masked_fill(x[:, :-1] == PAD, -100)"),),
    )},
)
