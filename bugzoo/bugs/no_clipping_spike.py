"""no_clipping_spike: training without gradient clipping meets an outlier batch."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def clip_gradients(self) -> None:
    return None  # the mistake: no clip_grad_norm_ before optimizer.step()


class NoClippingSpike(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "clip_gradients", clip_gradients, active=from_onset(trainer))


BUG = NoClippingSpike(
    id="no_clipping_spike",
    title="No gradient clipping when an outlier batch arrives",
    category="optim",
    taxonomy={
        "H.training.data.low_quality": "partial: one outlier batch",
        "A.exploding_gradient": "literal",
    },
    symptom=("the outlier batch's huge gradient goes straight into the update: the loss jumps after"
             " the outlier and training does not recover, where a clipped run barely notices it"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("A single anomalous batch (a shard with features in the wrong units, "
                 "mislabelled duplicates) can produce a gradient thousands of times larger "
                 "than usual. Without clip_grad_norm_ it enters "
                 "Adam's moment estimates unchanged: the first moment drags every weight in "
                 "the outlier's direction for several steps, and the inflated second moment "
                 "shrinks all later updates for hundreds of steps. Clipping caps the damage "
                 "while keeping the direction."),
    buggy="""\
loss.backward()
optimizer.step()                          # no clipping""",
    fixed="""\
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
optimizer.step()""",
    models=("mlp", "lstm"),
    inapplicable={"gpt": ("an outlier batch of features in the wrong units: token ids have no "
                          "units to get wrong")},
    onset="${harness.outlier_step}",
    onset_note="the step at which the outlier batch arrives",
    reproducers={model: SetupDelta(
        setup=(
            (batch, batch + "        if step == 150:  # a corrupted shard: " + outlier),
            ("        loss.backward()\n",
             "        loss.backward()\n"
             f"        torch.nn.utils.clip_grad_norm_(model.parameters(), {clip})\n"),
        ),
        patch=((f"        torch.nn.utils.clip_grad_norm_(model.parameters(), {clip})\n", ""),),
        settings={"STEPS": 300, **regime},  # the scenario's: 150 steps after the outlier batch
    ) for model, batch, outlier, clip, regime in (
        ("mlp", "        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n",
         "one example, a wrong label, wrong units\n"
         "            xb, yb = xb[:1].expand(BATCH, DIM) * 1e3,"
         " (yb[:1] + 1).expand(BATCH) % CLASSES\n", 10.0,
         # a fifth of the learning rate: the steps after the outlier are small, and the ones on
         # the weights it hit are shrunk further by the second moment its unclipped gradient
         # inflated, so the push it gave is not undone in the 150 steps left (at the default
         # rate the mlp re-learns its easy task within 40). Blobs far apart: the clipped run
         # ends near zero loss on every draw of the mixture, and the damage stands above it
         {"SPREAD": 4.0, "LR": 2e-3}),
        ("lstm", "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
         "one review repeated, the wrong label\n"
         "            inputs, yb = [t[:1].expand(BATCH, *t.shape[1:]) for t in inputs], (\n"
         "                1 - yb[:1]).expand(BATCH)\n", 1.0, {}))},
)
