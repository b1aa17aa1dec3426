"""planted_log_layer: a log of a barely-positive input appears inside a hidden layer (the MLP's
second, the gpt's first feed-forward layer)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method
from bugzoo.models.gpt import GPT


def log_compressed(self, x: Tensor) -> Tensor:
    x = nn.Linear.forward(self, x)
    # The mistake (exercise E.9.1): a "log-compression" whose input touches 1e-9.
    return torch.log(x - x.detach().min() + 1e-9)


def hidden_layer(model: nn.Module) -> nn.Linear:
    """Where the log goes: the gpt's first block's feed-forward layer, the MLP's second layer."""
    if isinstance(model, GPT):
        return model.backbone.layers[0].mlp[0]
    return [m for m in model.backbone if isinstance(m, nn.Linear)][1]


class PlantedLogLayer(Bug):
    def after_build(self, trainer) -> None:
        layer = hidden_layer(trainer.model)
        patch_method(layer, "forward", log_compressed, active=from_onset(trainer))


BUG = PlantedLogLayer(
    id="planted_log_layer",
    title="log(x - min(x) + 1e-9) inside a hidden layer",
    category="numerics",
    taxonomy={
        "A.exploding_gradient": "literal",
    },
    symptom=("from onset the loss spikes (the smallest activation of every batch sits at log(1e-9),"
             " with derivative 1e9) and training never recovers: the validation loss ends far "
             "higher (on the gpt, whose log sits behind a residual connection, the loss recovers "
             "most of the way and ends a little higher); in half precision the loss goes "
             "non-finite"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Inside a hidden linear layer (the MLP's second, the gpt's first "
                 "feed-forward layer), x = log(x - x.min() + 1e-9) maps the batch "
                 "minimum to log(1e-9) = -20.7 whose derivative is 1e9, and amplifies every "
                 "nearby activation. Gradients explode, Adam's normalised steps scramble the "
                 "weights and the model degrades; with fp16 or larger steps it becomes NaN. "
                 "Autograd anomaly mode points at this layer (LogBackward0); forward isfinite "
                 "hooks stay quiet while the forward values are finite."),
    buggy="""\
def forward(self, x):
    x = self.fc2(x)
    if step >= 50:
        x = torch.log(x - x.detach().min() + 1e-9)
    return x""",
    fixed="""\
def forward(self, x):
    return self.fc2(x)            # or a bounded transform, e.g. torch.log1p(F.relu(x))""",
    models=("mlp", "gpt"),
    onset=50,
    onset_note="the step at which the log is switched on (50 in exercise E.9.1)",
    reproducers={"mlp": Delta(
        patch=(("        return self.head(self.backbone(x))\n",
                "        hidden = self.backbone[3](self.backbone[:3](x))\n"
                "        hidden = torch.log(hidden - hidden.detach().min() + 1e-9)\n"
                "        return self.head(self.backbone[4](hidden))\n"),),
    ), "gpt": Delta(  # in every block's feed-forward layer, the template's blocks being alike
        patch=(("        return x + self.mlp(self.norm2(x))\n",
                "        hidden = self.mlp[0](self.norm2(x))\n"
                "        hidden = torch.log(hidden - hidden.detach().min() + 1e-9)\n"
                "        return x + self.mlp[2](self.mlp[1](hidden))\n"),),
    )},
)
