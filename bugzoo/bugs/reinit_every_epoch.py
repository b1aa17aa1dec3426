"""reinit_every_epoch: the weight initialisation runs at the start of every epoch, not once."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method
from bugzoo.models.gpt import GPT


def initialise(model: nn.Module) -> None:
    """The models' weight initialisation, as their builds give it. The gpt's is its own
    ``init_weights`` on every module (its head is the token embedding, drawn with it); the
    classifiers' is every layer's own default init (``reset_parameters``), then a small head so
    the first loss is about log(C)."""
    with torch.no_grad():
        if isinstance(model, GPT):
            model.apply(GPT.init_weights)
            return
        for module in model.modules():
            if module is not model and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()


def start_epoch(self, epoch: int) -> None:
    # The mistake: the init call sits inside the epoch loop instead of before it. Each epoch
    # starts from fresh random weights; the optimizer (its moments, the schedule) carries on.
    initialise(self.model)


class ReinitEveryEpoch(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "start_epoch", start_epoch, active=from_onset(trainer))


BUG = ReinitEveryEpoch(
    id="reinit_every_epoch",
    title="Weights re-initialised at the start of every epoch",
    category="loop",
    taxonomy={
        "H.model.type.multiple_init_cnn": "literal",
    },
    symptom=("the training loss falls within each epoch, then jumps back to its first value "
             "(about log C; log V on the gpt) as the next epoch begins, a saw-tooth; validation "
             "never gets past what one epoch can learn and ends with a higher loss than a clean "
             "run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("An initialisation call placed inside the epoch loop throws away everything the "
                 "model learnt at each epoch boundary: the weights are drawn afresh while the "
                 "optimizer keeps its moments and the schedule its position. Each epoch relearns "
                 "from scratch, with a learning rate that keeps shrinking and momentum that "
                 "still points along the old weights' gradients, so the last epoch, the only "
                 "one that counts, is short and undertrained."),
    buggy="""\
model = Net()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for epoch in range(epochs):
    model.apply(init_weights)              # re-initialised every epoch
    for x, y in loader:
        ...""",
    fixed="""\
model = Net()
model.apply(init_weights)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for epoch in range(epochs):
    for x, y in loader:
        ...""",
    models=("mlp", "lstm", "gpt"),
    onset=125,
    onset_note=("the first epoch boundary: 4000 training rows (sentences, on the gpt) in batches"
                " of 32 (the first "
                "epoch's weights are the build's own initialisation)"),
    reproducers={"mlp": Delta(
        patch=(
            ("    order = torch.randperm(len(x_train))\n",
             "    for m in model.modules():\n"
             "        if isinstance(m, nn.Linear):\n"
             "            m.reset_parameters()\n"
             "    order = torch.randperm(len(x_train))\n"),
        ),
    ), "lstm": Delta(
        patch=(
            ("    order = torch.randperm(len(train[-1]))\n",
             "    for m in model.modules():\n"
             "        if hasattr(m, \"reset_parameters\"):\n"
             "            m.reset_parameters()\n"
             "    order = torch.randperm(len(train[-1]))\n"),
        ),
    ), "gpt": Delta(  # the template's build: each layer's own init, then GPT-2's for the tables
        patch=(
            ("    order = torch.randperm(len(train[-1]))\n",
             "    for m in model.modules():\n"
             "        if hasattr(m, \"reset_parameters\"):\n"
             "            m.reset_parameters()\n"
             "    for table in (model.tokens, model.positions):\n"
             "        nn.init.normal_(table.weight, std=0.02)\n"
             "    order = torch.randperm(len(train[-1]))\n"),
        ),
    )},
    since="1.1",
)
