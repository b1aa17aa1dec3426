"""adam_eps_fp16: pure-fp16 parameters with Adam's default eps, which rounds to 0 in fp16."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


def half_forward(self, *inputs):
    """The model's own forward on float16 inputs, its outputs back in float32 for the loss."""
    inputs = tuple(t.half() if t.is_floating_point() else t for t in inputs)
    return type(self).forward(self, *inputs).float()


class AdamEpsFp16(Bug):
    def after_build(self, trainer) -> None:
        model, o = trainer.model, trainer.cfg.optim
        model.half()  # to halve memory, without fp32 master weights or a GradScaler
        patch_method(model, "forward", half_forward)
        # The mistake: eps=1e-8 is below fp16's smallest subnormal (6e-8) and becomes 0, so
        # wherever exp_avg_sq underflows (tiny or zero gradients) Adam divides by zero.
        trainer.optimizer = torch.optim.AdamW(
            model.parameters(), lr=o.lr, betas=tuple(o.betas),
            eps=float(trainer.cfg.bug.params.eps), weight_decay=o.weight_decay)
        trainer.scheduler = trainer.build_scheduler()


BUG = AdamEpsFp16(
    id="adam_eps_fp16",
    title="Adam eps=1e-8 with fp16 parameters",
    category="precision",
    taxonomy={
        "H.training.optimiser.adam_eps_too_low": "literal",
        "J.HAE": "literal",
        "L.bf16_precision": "partial: the fp16 analogue",
    },
    honours_onset=False,
    symptom=("within the first steps some weights become inf or NaN: Adam's update divides by "
             "sqrt(v) + eps with both terms 0 in fp16"),
    check=SymptomCheck("nonfinite", "event"),
    explanation=("In float16, 1e-8 rounds to 0 and squared gradients below about 2.4e-4 "
                 "underflow to 0 in exp_avg_sq. Adam's step m / (sqrt(v) + eps) becomes m / 0: "
                 "inf for a small non-zero gradient, NaN (0 / 0) for a zero one (a dead ReLU "
                 "unit). Keep fp32 master weights (autocast + GradScaler), or use an eps "
                 "representable in fp16 such as 1e-4."),
    buggy="""\
model = model.half()                                   # fp16 weights, no master copy
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)   # eps=1e-8 -> 0 in fp16""",
    fixed="""\
# keep the weights in float32 (what the control runs); for speed, add
# torch.autocast(dtype=torch.float16) with a GradScaler
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)   # eps=1e-8 is fine in float32""",
    models=("mlp", "gpt"),
    params={
        "eps": 1e-08,  # Adam"s default; 1.0e-4 is representable in fp16
    },
    patches_only=False,  # it also edits the built run directly
)
