"""functional_dropout_in_eval: dropout written as F.dropout(x, p), which ignores self.training, so
it stays on when the model is put in eval mode."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def dropout_ignoring_mode(self, x: Tensor) -> Tensor:
    # The mistake: the functional call leaves `training` at its default, True, instead of
    # passing self.training; model.eval() flips the flag, and nothing here reads it.
    return F.dropout(x, self.p)


class FunctionalDropoutInEval(Bug):
    def after_build(self, trainer) -> None:
        for module in trainer.model.modules():
            if isinstance(module, nn.Dropout):
                patch_method(module, "forward", dropout_ignoring_mode,
                             active=from_onset(trainer))


BUG = FunctionalDropoutInEval(
    id="functional_dropout_in_eval",
    title="F.dropout without training=self.training: dropout stays on in eval",
    category="eval",
    taxonomy={
        "T.transformers-33844": "literal",
        "H.api.wrong_api_usage":
            "partial: the call is legal; the misuse is leaving F.dropout's `training` argument at "
            "its default (True) inside a module, so the module ignores eval()",
    },
    symptom=("model.eval() is called and training looks normal, yet validation loss is noisier "
             "and higher than the model's real loss, and evaluating the same weights twice "
             "gives different numbers"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("nn.Dropout reads the module's training flag, which model.eval() clears. The "
                 "functional F.dropout has no module to read it from: its `training` argument "
                 "defaults to True, so a forward that calls F.dropout(x, p) without "
                 "training=self.training drops activations in evaluation too. Unlike a missing "
                 "model.eval(), the mode switch happens; this one path just never looks at it "
                 "(in transformers a FlashAttention path did exactly this)."),
    buggy="""\
class Block(nn.Module):
    def forward(self, x):
        return x + F.dropout(self.attn(self.norm(x)), p=self.p)  # training defaults to True

model.eval()
with torch.no_grad():
    val_loss = loss_fn(model(x_val), y_val)""",
    fixed="""\
class Block(nn.Module):
    def forward(self, x):
        return x + F.dropout(self.attn(self.norm(x)), p=self.p, training=self.training)

model.eval()
with torch.no_grad():
    val_loss = loss_fn(model(x_val), y_val)""",
    models=("mlp", "transformer"),
    inapplicable={"gpt": ("the causal LM has no dropout on its defaults, so dropout left on in "
                          "eval changes nothing")},
    reproducers={"mlp": Delta(
        patch=(
            ("\n\nclass MLP(nn.Module):",
             "\n\nclass Dropout(nn.Module):\n"
             "    def forward(self, x):\n"
             "        return F.dropout(x, 0.2)\n"
             "\n\nclass MLP(nn.Module):"),
            ("nn.ReLU(), nn.Dropout(0.2),", "nn.ReLU(), Dropout(),"),
        ),
        # blobs far apart: evaluated correctly, every draw of the mixture ends near zero loss,
        # so the loss that the masks left on in eval add is not buried under how hard the draw
        # is; a larger validation split averages over the rare points a mask pushes across
        settings={"SPREAD": 4.0, "N_VAL": 2000},
    ), "transformer": Delta(
        patch=(
            ("\n"
             "\n"
             "class SelfAttention(nn.Module):",
             "\n"
             "\n"
             "class Dropout(nn.Module):\n"
             "    def forward(self, x):\n"
             "        return F.dropout(x, 0.1)\n"
             "\n"
             "\n"
             "class SelfAttention(nn.Module):"),
            ("self.dropout = nn.Dropout(0.1)",
             "self.dropout = Dropout()"),
        ),
    )},
    since="1.1",
)
