"""corrupted_inputs: from onset the training data contains rows of NaN (a corrupt shard)."""

from __future__ import annotations

from dataclasses import replace

import torch

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


class CorruptedInputs(Bug):
    def after_build(self, trainer) -> None:
        frac = float(trainer.cfg.bug.params.row_frac)
        train = trainer.train_loader.split
        g = torch.Generator().manual_seed(trainer.seed)
        bad = torch.rand(len(train), generator=g) < frac
        x = train.x.clone()
        x[bad] = float("nan")  # e.g. failed parses or divisions by zero upstream
        corrupted = replace(train, x=x)
        next_batch = trainer.next_batch

        def next_batch_from_corrupted_shard(self):
            # From onset the loader reads a shard whose rows were never validated.
            self.train_loader.split = corrupted
            return next_batch()

        patch_method(trainer, "next_batch", next_batch_from_corrupted_shard,
                     active=from_onset(trainer))


BUG = CorruptedInputs(
    id="corrupted_inputs",
    title="NaN rows in the input data",
    category="data",
    symptom=("the loss turns NaN at the first batch holding a corrupt row, and the weights become "
             "NaN after the next optimizer step"),
    check=SymptomCheck("nonfinite", "event"),
    explanation=("A few input rows are NaN (missing values read as NaN, a failed parse, a "
                 "division by zero in preprocessing). One NaN input makes that sample's "
                 "activations, the batch loss and every gradient NaN; the optimizer then writes "
                 "NaN into the weights and the run never recovers."),
    buggy="""\
x = torch.tensor(df.values, dtype=torch.float32)   # missing cells become NaN""",
    fixed="""\
df = df.dropna()                                    # or impute; then assert
x = torch.tensor(df.values, dtype=torch.float32)
assert torch.isfinite(x).all()""",
    models=("mlp", "resnet"),
    onset="step at which the corrupt rows start arriving (bug.onset)",
)
