"""eval_in_train_mode: validation runs without model.eval()."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def enter_eval(self) -> None:
    # The mistake: validation starts without self.model.eval(); dropout stays on and BatchNorm
    # normalises with the validation batch's statistics (and folds them into its running
    # averages). torch.no_grad() still applies, so nothing looks wrong.
    pass


class EvalInTrainMode(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "enter_eval", enter_eval, active=from_onset(trainer))


BUG = EvalInTrainMode(
    id="eval_in_train_mode",
    title="Validation without model.eval()",
    category="eval",
    taxonomy={
        "H.api.missing_api_call": "literal",
        "T.transformers-33844": "partial: the same effect, but eval() is never called",
    },
    symptom=("validation loss is computed with dropout active (and BatchNorm on batch statistics), "
             "so it is noisier and higher than the model's real loss"),
    check=SymptomCheck("final_val_loss", "higher"),
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
    inapplicable={"gpt": ("the causal LM has no dropout or batch norm on its defaults, so train "
                          "and eval mode compute the same: the mistake has nothing to change")},
    reproducers={"mlp": SetupDelta(
        setup=(("nn.Dropout(0.2)", "nn.Dropout(0.5)"),),  # the scenario's dropout
        patch=(("def evaluate(x, y):\n    model.eval()\n", "def evaluate(x, y):\n"),),
    )},
)
