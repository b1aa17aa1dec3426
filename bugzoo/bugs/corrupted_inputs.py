"""corrupted_inputs: from onset the training data contains rows of NaN (a corrupt shard)."""

from __future__ import annotations

from dataclasses import replace

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import BatchLoader


def loader_over_unvalidated_rows(self) -> BatchLoader:
    # The mistake: the training shard was never validated, and some of its rows are NaN
    # (failed parses, a division by zero upstream); the loader reads them as they are.
    loader = type(self).build_train_loader(self)
    g = torch.Generator().manual_seed(self.seed)
    bad = torch.rand(len(loader.split), generator=g) < float(self.cfg.bug.params.row_frac)
    x = loader.split.x.clone()
    x[bad] = float("nan")
    loader.split = replace(loader.split, x=x)
    return loader


class CorruptedInputs(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_train_loader", loader_over_unvalidated_rows)


BUG = CorruptedInputs(
    id="corrupted_inputs",
    title="NaN rows in the input data",
    category="data",
    taxonomy={
        "H.training.data.low_quality": "literal",
        "A.abnormal_data": "literal",
    },
    honours_onset=False,
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
    inapplicable={"gpt": ("NaN rows in float features: token ids are integers, which cannot hold"
                          " a NaN")},
    onset_note="the rows are in the data the loader reads",
    params={
        "row_frac": 0.01,  # fraction of training rows that are NaN
    },
    reproducers={"mlp": Delta(
        patch=(("x_train, y_train = make_split(${N_TRAIN})\n",
                "x_train, y_train = make_split(${N_TRAIN})\n"
                "x_train[torch.rand(len(x_train), generator=torch.Generator().manual_seed(0))"
                " < 0.01] = float(\"nan\")\n"),),
    ), "resnet": Delta(
        patch=(("mean, std = train[0].mean((0, 2, 3), keepdim=True), "
                "train[0].std((0, 2, 3), keepdim=True)\n",
                "mean, std = train[0].mean((0, 2, 3), keepdim=True), "
                "train[0].std((0, 2, 3), keepdim=True)\n"
                "train[0][torch.rand(len(train[0]), generator=torch.Generator().manual_seed(0))"
                " < 0.01] = float(\"nan\")\n"),),
    )},
)
