"""grad_accum_token_norm: under gradient accumulation, micro-batch means are averaged."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def micro_batch_count(self, targets: Tensor, step_targets: Sequence[Tensor]) -> float:
    # The mistake: each micro-batch's loss is the mean over its own tokens, and the step divides
    # it by the number of micro-batches. Exact only when every micro-batch holds as many tokens;
    # otherwise a token in a micro-batch of short sentences weighs more than one in long ones.
    return len(step_targets)


class GradAccumTokenNorm(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "loss_divisor", micro_batch_count, active=from_onset(trainer))


BUG = GradAccumTokenNorm(
    id="grad_accum_token_norm",
    title="Gradient accumulation averages per-micro-batch token means",
    category="loss",
    taxonomy={
        "L.grad_accum_token_norm": "literal",
        "H.training.loss.wrong_calculation": "partial: a normalisation fault under accumulation",
    },
    symptom=("with gradient accumulation, training and validation loss end above those of the "
             "same run with its loss normalised over the whole step's tokens"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("With k micro-batches per optimizer step, the step's loss should be the sum of "
                 "every token's loss over the number of tokens in all k micro-batches. Taking "
                 "each micro-batch's mean and dividing by k weighs each micro-batch equally "
                 "instead of each token: tokens in micro-batches of short sentences count more. "
                 "The gradient is no longer that of the full batch, and the gap grows with k "
                 "and with the spread of sentence lengths (the 2024 Transformers report)."),
    buggy="""\
for micro in micro_batches:
    loss = F.cross_entropy(model(micro.x).flatten(0, 1), micro.y.flatten())   # mean per micro
    (loss / k).backward()""",
    fixed="""\
n_tokens = sum((m.y != -100).sum() for m in micro_batches)
for micro in micro_batches:
    loss = F.cross_entropy(model(micro.x).flatten(0, 1), micro.y.flatten(), reduction="sum")
    (loss / n_tokens).backward()""",
    models=("gpt",),
    references=("https://huggingface.co/blog/gradient_accumulation",
                "https://github.com/huggingface/transformers/pull/34191"),
    since="1.2",
    reproducers={"gpt": SetupDelta(
        setup=(
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "ACCUMULATE = 4  # micro-batches per optimizer step\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            ("        loss = loss_fn(model(*inputs), yb)\n"
             "        loss.backward()\n",
             "        tokens = (yb != -100).sum()  # the batch's real target tokens\n"
             "        for part in torch.arange(BATCH).chunk(ACCUMULATE):  # gradient accumulation\n"
             "            loss = loss_fn(model(*(t[part] for t in inputs)), yb[part])"
             "  # a token mean\n"
             "            (loss * (yb[part] != -100).sum() / tokens).backward()\n"),
        ),
        patch=(("            (loss * (yb[part] != -100).sum() / tokens).backward()\n",
                "            (loss / ACCUMULATE).backward()\n"),),
    )},
)
