"""eval_in_train_mode: validation runs without model.eval()."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Symptom, patch_method


def evaluate(self) -> tuple[float, float]:
    # The mistake: no self.model.eval(); dropout stays on and BatchNorm normalises with the
    # validation batch's statistics (and folds them into its running averages).
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for batch in self.val_loader:
            batch = batch.to(self.device)
            with self.autocast():
                logits = self.forward(batch)
            total_loss += nn.functional.cross_entropy(
                logits.float(), batch.y, reduction="sum").item()
            correct += (logits.argmax(-1) == batch.y).sum().item()
            count += len(batch.y)
    self.model.train()
    return total_loss / count, correct / count


class EvalInTrainMode(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "evaluate", evaluate)


BUG = EvalInTrainMode(
    id="eval_in_train_mode",
    title="Validation without model.eval()",
    category="eval",
    symptom=Symptom("final_val_loss", "higher",
                    "validation loss is computed with dropout active (and BatchNorm on batch "
                    "statistics), so it is noisier and higher than the model's real loss"),
    explanation=("torch.no_grad() only turns off gradient tracking; it does not change layer "
                 "behaviour. Without model.eval(), dropout keeps zeroing activations during "
                 "validation and BatchNorm normalises with the validation batch's own "
                 "statistics while updating its running averages with validation data. The "
                 "reported validation metrics understate the model and fluctuate."),
    buggy="""\
with torch.no_grad():            # no model.eval()
    val_loss = loss_fn(model(x_val), y_val)""",
    fixed="""\
model.eval()
with torch.no_grad():
    val_loss = loss_fn(model(x_val), y_val)
model.train()""",
    models=("mlp",),
)
