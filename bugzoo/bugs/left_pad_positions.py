"""left_pad_positions: position ids count from a row's first slot, padding included."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def positions_from_first_slot(self, key_padding: Tensor) -> Tensor:
    # The mistake: positions are the slot indices, not derived from the padding mask. With
    # right padding (training) that is the same thing; with left padding (batched generation)
    # every prompt shorter than the longest starts at a position it never started at in training.
    return torch.arange(key_padding.shape[1], device=key_padding.device).expand_as(key_padding)


class LeftPadPositions(Bug):
    def after_build(self, trainer) -> None:
        patch_method(trainer.model.backbone, "position_ids", positions_from_first_slot,
                     active=from_onset(trainer))


BUG = LeftPadPositions(
    id="left_pad_positions",
    title="Position ids that ignore left padding",
    category="model",
    taxonomy={
        "L.left_pad_positions": "literal",
        "H.training.preproc_wrong.padding": "partial: the padding is right; positions ignore it",
    },
    symptom=("training and validation look healthy, but sentences the model writes from a batch "
             "of prompts are worse than its validation loss promised, the more so the shorter "
             "the prompt: a prompt's continuation depends on the others in its batch"),
    check=SymptomCheck("generation_gap", "higher"),
    explanation=("A decoder-only model generating for a batch pads its prompts on the left, so "
                 "that every row's next token goes in the same last column. Position ids must then "
                 "count real tokens (attention_mask.cumsum(-1) - 1), not slots: counted from the "
                 "first slot, a prompt with three pads in front of it starts at position 3. "
                 "Training pads on the right, where both rules agree, so nothing shows until the "
                 "model serves a batch."),
    buggy="""\
positions = torch.arange(tokens.shape[1])            # slot index, padding counted""",
    fixed="""\
positions = (attention_mask.cumsum(-1) - 1).clamp_min(0)   # real tokens before each one""",
    models=("gpt",),
    references=("https://github.com/huggingface/transformers/issues/33095",),
    since="1.2",
)
