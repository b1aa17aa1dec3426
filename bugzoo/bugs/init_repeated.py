"""init_repeated: the model's weight initialisation runs once per submodule, each time over the
whole model (as GPT-2's from-scratch init did in transformers before PR 17877)."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.bugs.reinit_every_epoch import initialise
from bugzoo.train import Trainer


def build_model(self) -> nn.Module:
    model = Trainer.build_model(self)
    # The mistake: an init meant to be applied module by module (model.apply(init)) walks the
    # whole model each time it is called, so the whole model is initialised once per submodule.
    # Every draw is a correct init, and the last one is what trains: only time is lost.
    for _ in model.modules():
        initialise(model)
    return model


class InitRepeated(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_model)


BUG = InitRepeated(
    id="init_repeated",
    title="Weight initialisation repeated once per submodule",
    category="performance",
    taxonomy={
        "T.transformers-17877": "literal",
        "H.model.type.multiple_init_cnn": "partial: the weights are initialised many times, "
                                          "at build time, in an MLP, transformer or GPT rather "
                                          "than a CNN; every draw is a correct init and the "
                                          "last one trains, so only start-up time is lost",
    },
    honours_onset=False,
    symptom=("the run takes noticeably longer to get from start to its first training step, "
             "and the delay grows with the model's size and its number of layers; training "
             "itself then looks normal"),
    check=SymptomCheck("startup_s", "higher"),
    explanation=("An init function meant for model.apply() should touch only the module it is "
                 "given. One that walks all parameters below it (or the whole model) instead "
                 "re-draws the same tensors again and again: apply() calls it once per "
                 "submodule, so the work grows with the number of modules times the number of "
                 "parameters. Each draw is a valid initialisation, so nothing looks wrong "
                 "except the time it takes to build the model, which for a large model can be "
                 "minutes."),
    buggy="""\
def init_weights(module):
    for m in model.modules():            # the whole model, not `module`
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()

model.apply(init_weights)                # called once per submodule""",
    fixed="""\
def init_weights(module):
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()

model.apply(init_weights)""",
    models=("mlp", "transformer", "gpt"),
    since="1.1",
)
