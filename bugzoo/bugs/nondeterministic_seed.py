"""nondeterministic_seed: the loader shuffles with a NumPy Generator that no seed reaches."""

from __future__ import annotations

import numpy as np

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.data import BatchLoader


def unseeded_train_loader(self) -> BatchLoader:
    # The mistake: the shuffle order comes from np.random.default_rng() created without a
    # seed. seed_everything seeds random, np.random (the legacy global state) and torch, but
    # a new-style NumPy Generator is independent of all three and draws from OS entropy.
    rng = np.random.default_rng()
    return BatchLoader(self.data.train, self.cfg.harness.batch_size, shuffle=True,
                       seed=int(rng.integers(2**62)), drop_last=True)


class NondeterministicSeed(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_train_loader", unseeded_train_loader)


BUG = NondeterministicSeed(
    id="nondeterministic_seed",
    title="An RNG the seed does not reach (unseeded shuffle)",
    category="reproducibility",
    honours_onset=False,
    symptom=("two runs with the same seed end with different validation losses (their curves part "
             "from the first step); clean runs with the same seed are bitwise identical"),
    check=SymptomCheck("final_val_loss", "varies"),
    explanation=("Reproducibility requires every source of randomness to be seeded. "
                 "np.random.seed() only seeds NumPy's legacy global state; a Generator from "
                 "np.random.default_rng() without a seed (like an unseeded random.Random(), or "
                 "a worker RNG) is seeded from OS entropy, so the batch order, and with it the "
                 "whole run, changes every time."),
    buggy="""\
seed_everything(0)                       # random.seed, np.random.seed, torch.manual_seed
rng = np.random.default_rng()            # not covered by any of them
for epoch in range(epochs):
    order = rng.permutation(len(train_set))""",
    fixed="""\
seed_everything(0)
rng = np.random.default_rng(0)           # seed every generator you create
for epoch in range(epochs):
    order = rng.permutation(len(train_set))""",
)
