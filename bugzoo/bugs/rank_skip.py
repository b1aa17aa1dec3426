"""rank_skip: one rank skips a batch the others train on, so DDP's collectives fall out of step."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


class RankSkip(Bug):
    def before_build(self, trainer) -> None:
        if trainer.rank != int(trainer.cfg.bug.params.rank):
            return

        def train_step(self) -> torch.Tensor:
            # The mistake: a rank-local data filter. At onset this rank's batch fails the
            # "too short" check and the rank `continue`s before forward and backward, so it
            # makes one gradient all-reduce fewer than the other ranks.
            self.zero_grad()
            self.next_batch()
            return torch.zeros((), device=self.device)

        patch_method(trainer, "train_step", train_step,
                     active=lambda: trainer.step == trainer.onset)


BUG = RankSkip(
    id="rank_skip",
    title="One rank skips a batch under DDP (collective mismatch)",
    category="distributed",
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
    if batch.lengths.max() < MIN_LEN:        # rank-local decision
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
    models=("mlp", "lstm"),
    onset="the step at which the rank meets the batch it skips",
    loud=True,
    requires=("distributed",),
)
