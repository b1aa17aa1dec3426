"""narrow_bottleneck: one hidden layer is built far too narrow (2 units) for the task."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model
from bugzoo.models.gpt import GPT


def build_mlp_narrow_first_layer(self) -> nn.Module:
    """mlp: the first hidden layer has hidden // 64 units (2 of 128), the next reads those."""
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    first, second = model.backbone[0], model.backbone[3]
    narrow = first.out_features // 64  # The mistake: // 64 where the layer keeps its width
    model.backbone[0] = nn.Linear(first.in_features, narrow)
    model.backbone[3] = nn.Linear(narrow, second.out_features)
    return model


def build_resnet_narrow_last_stage(self) -> nn.Module:
    """resnet: the last stage has widths[-1] // 16 channels (2 of 32), so the pooled features
    the head reads are 2 numbers."""
    params = self.cfg.model.params
    widths = [*params.widths[:-1], params.widths[-1] // 16]  # The mistake: // 16
    return build_model(self.cfg.model.name, self.data, **{**params, "widths": widths})


def build_gpt_narrow_feed_forward(self) -> nn.Module:
    """gpt: the feed-forward hidden layer has 2 * dim // 64 units (2 of 128) in every block,
    whose code is written once; the narrow layers get the gpt's own initialisation."""
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    for block in model.backbone.layers:
        first, second = block.mlp[0], block.mlp[2]
        narrow = first.out_features // 64  # The mistake: // 64 where the layer keeps its width
        block.mlp[0] = nn.Linear(first.in_features, narrow)
        block.mlp[2] = nn.Linear(narrow, second.out_features)
        block.mlp.apply(GPT.init_weights)
    return model


BUILDERS = {"mlp": build_mlp_narrow_first_layer, "resnet": build_resnet_narrow_last_stage,
            "gpt": build_gpt_narrow_feed_forward}


class NarrowBottleneck(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", BUILDERS[trainer.cfg.model.name])


BUG = NarrowBottleneck(
    id="narrow_bottleneck",
    title="A hidden layer far too narrow (2 units)",
    category="model",
    taxonomy={
        "H.model.layer_props.suboptimal_neurons": "literal",
        "J.LCN": "literal",
    },
    honours_onset=False,
    symptom=("training loss levels off early, well above the clean run's, and validation "
             "accuracy ends lower; nothing diverges and no error is raised"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Everything the network passes on goes through the narrowest layer: with two "
                 "ReLU units (or two channels before global pooling) every input is summarised "
                 "by at most two numbers, too few to keep six classes apart, and a unit that "
                 "dies takes half of the signal with it. The rest of the network is wide enough, "
                 "so the loss just stalls at a level the clean model passes early. In the gpt "
                 "the narrow layer is each block's feed-forward layer, behind a residual "
                 "connection that attention's output still passes through."),
    buggy="""\
self.backbone = nn.Sequential(
    nn.Linear(in_features, hidden // 64), nn.ReLU(), nn.Dropout(dropout),   # 2 units
    nn.Linear(hidden // 64, hidden), nn.ReLU(), nn.Dropout(dropout))""",
    fixed="""\
self.backbone = nn.Sequential(
    nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(dropout),
    nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout))""",
    models=("mlp", "resnet", "gpt"),
    reproducers={"mlp": Delta(
        patch=(
            ("nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64, 64), nn.ReLU())",
             "nn.Linear(DIM, 64 // 32), nn.ReLU(), nn.Dropout(0.2),\n"
             "                                      nn.Linear(64 // 32, 64), nn.ReLU())"),
        ),
    ), "resnet": Delta(
        patch=(
            ("model = ResNet(mean, std)\n",
             "model = ResNet(mean, std, (16, 32 // 16))\n"),
        ),
    ), "gpt": Delta(  # the block's code is written once: every block gets the narrow layer
        patch=(
            ("nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM)",
             "nn.Linear(DIM, 4 * DIM // 128), nn.GELU(), nn.Linear(4 * DIM // 128, DIM)"),
        ),
    )},
    since="1.1",
)
