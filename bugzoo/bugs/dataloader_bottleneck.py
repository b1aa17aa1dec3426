"""dataloader_bottleneck: every training row is parsed from text, one sample at a time."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


class DataloaderBottleneck(Bug):
    def after_build(self, trainer) -> None:
        split = replace(trainer.train_loader.split)
        # The data is kept as text lines (as read from a CSV / JSON-lines file); float repr
        # round-trips exactly, so the values the model sees equal the clean run's.
        lines = [" ".join(map(repr, row)) for row in split.x.reshape(len(split), -1).tolist()]
        shape, dtype = split.x.shape[1:], split.x.dtype

        def parse(line: str) -> Tensor:
            return torch.tensor([float(v) for v in line.split()], dtype=dtype).view(shape)

        def inputs(self, index: Tensor | slice) -> tuple[Tensor, ...]:
            # The mistake: an expensive per-sample transform (parsing) runs in __getitem__ in
            # the main process (num_workers=0), on every step, instead of once up front.
            rows = range(len(lines))[index] if isinstance(index, slice) else index.tolist()
            x = torch.stack([parse(lines[i]) for i in rows])
            if self.lengths is None:
                return (x,)
            lengths = self.lengths[index]
            return (x[:, : int(lengths.max())], lengths)

        patch_method(split, "inputs", inputs)
        trainer.train_loader.split = split


BUG = DataloaderBottleneck(
    id="dataloader_bottleneck",
    title="Per-sample parsing in the data loader (num_workers=0)",
    category="performance",
    honours_onset=False,
    symptom=("same losses as the clean run, but each step waits for its batch: the share of step "
             "time spent loading data rises, most for models whose rows are wide "
             "(results/validity.md has how much, per model)"),
    check=SymptomCheck("data_time_frac", "higher"),
    explanation=("Each sample is decoded from text in __getitem__, in Python, in the training "
                 "process (num_workers=0). The accelerator idles while the CPU parses; the run is "
                 "correct but slower. How much depends on the hardware: on a GPU the model step "
                 "shrinks while the parsing stays on the CPU, so the parsing takes most of each "
                 "step; on a CPU-only machine the model step is CPU work too, and the parsing takes"
                 " a smaller share. Preprocess once (or cache tensors), vectorise the transform, or"
                 " use worker processes."),
    buggy="""\
class RowsDataset(Dataset):
    def __getitem__(self, i):
        x = torch.tensor([float(v) for v in self.lines[i].split()])   # parse every time
        return x, self.y[i]

loader = DataLoader(RowsDataset(lines, y), batch_size=32, shuffle=True, num_workers=0)""",
    fixed="""\
x = torch.tensor([[float(v) for v in line.split()] for line in lines])   # parse once
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=4)""",
)
