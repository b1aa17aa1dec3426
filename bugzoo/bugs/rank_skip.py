"""rank_skip: one rank skips a batch the others train on, so DDP's collectives fall out of step."""

from __future__ import annotations

import itertools

import torch

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method
from bugzoo.data import Batch


def filtered_out(batch: Batch, params) -> bool:
    """The rank-local data filter: a batch holding a review shorter than ``min_tokens``, or a
    row with a standardised feature beyond ``max_abs`` (an "outlier guard")."""
    if len(batch.inputs) > 1:  # sequences: (tokens, lengths)
        return int(batch.inputs[1].min()) < int(params.min_tokens)
    return float(batch.inputs[0].abs().amax()) > float(params.max_abs)


def step_unless_filtered(self) -> torch.Tensor:
    batch = next(self.batches)  # the loop's `for batch in loader`, on this rank's shard
    if filtered_out(batch, self.cfg.bug.params):
        # The mistake: `continue`. This rank runs no forward, no backward (so joins no
        # gradient all-reduce) and no optimizer step, while the other ranks carry on.
        return torch.zeros((), device=self.device)
    self.batches = itertools.chain([batch], self.batches)  # the step trains on this batch
    return type(self).run_step(self)


class RankSkip(Bug):
    def before_build(self, trainer) -> None:
        if trainer.rank == int(trainer.cfg.bug.params.rank):
            patch_method(trainer, "run_step", step_unless_filtered, active=from_onset(trainer))


BUG = RankSkip(
    id="rank_skip",
    title="One rank skips a batch under DDP (collective mismatch)",
    category="distributed",
    taxonomy={
        "H.gpu.data_parallelism": "literal",
        "T.deepspeed-5794": "partial: a collective mismatch from a skipped batch, not from routing",
    },
    symptom=("after onset the ranks' all-reduces pair off by one; the rank with the extra "
             "collective finally waits for a partner that never comes and the run blocks until the "
             "process-group timeout"),
    check=SymptomCheck("hung", "event"),
    explanation=("With DistributedDataParallel every backward() launches gradient all-reduces "
                 "that every rank must join. A data filter evaluated per rank (e.g. skip a batch "
                 "whose sequences are too short) lets one rank `continue` while the others run "
                 "backward. The collectives then match the wrong iterations (silently averaging "
                 "gradients of different steps) and the last one never completes: the job "
                 "hangs with processes alive and idle, with NCCL forever, with gloo until the "
                 "process-group timeout."),
    buggy="""\
for batch in loader:                         # each rank sees its own shard
    if batch.lengths.min() < MIN_LEN:        # rank-local decision
        continue                             # this rank skips backward
    loss = criterion(ddp_model(batch.x), batch.y)
    loss.backward()                          # all-reduce: every rank must join
    optimizer.step(); optimizer.zero_grad()""",
    fixed="""\
loader = DataLoader(dataset_filtered_before_sharding, sampler=DistributedSampler(...))
for batch in loader:                         # every rank runs every step
    loss = criterion(ddp_model(batch.x), batch.y)
    loss.backward()
    optimizer.step(); optimizer.zero_grad()
# or, to drop a batch dynamically: still run forward/backward under ddp_model.no_sync()
# with a zero loss, or agree on the skip with an all_reduce of the flag""",
    # The mechanism is model-independent and every run costs two rank processes plus a wait
    # for the collective timeout, so the catalogue plants it in the two cheapest models.
    models=("mlp", "lstm", "gpt"),
    onset_note=("the step from which the rank filters its batches; the first batch it drops "
                "desynchronises the collectives"),
    loud=True,
    requires=("distributed",),
    onset=10,
    params={
        "rank": 1,  # the rank whose data filter drops batches (rank 0 is the one watched)
        "min_tokens": 5,  # sequences: drop a batch holding a review shorter than this
        "max_abs": 3.0,  # features: drop a batch holding a standardised value beyond this
    },
)
