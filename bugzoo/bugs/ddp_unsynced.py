"""ddp_unsynced: ranks seeded differently and the model never wrapped in DDP."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


class DdpUnsynced(Bug):
    def before_build(self, trainer) -> None:
        # The mistake, in two halves that often come together: each rank seeds with
        # seed + rank (different initial weights), and the model is used bare instead of
        # through DistributedDataParallel, so gradients are never all-reduced.
        trainer.seed += trainer.rank
        patch_method(trainer, "wrap_model", lambda self, model: model)


BUG = DdpUnsynced(
    id="ddp_unsynced",
    title="Ranks train unsynchronised copies (no DDP, per-rank seeds)",
    category="distributed",
    taxonomy={
        "H.gpu.data_parallelism": "literal",
        "T.x-jxmnop-ddp-out-of-sync": "literal",
        "T.pytorch-104336": "partial: the same drift between ranks, from another cause",
        "T.deepspeed-1801": "partial: the same drift between ranks, from another cause",
    },
    honours_onset=False,
    symptom=("nothing fails and rank 0's curves look normal, but each rank trains its own copy on "
             "its own half of the data: the model that is kept ends with a higher validation loss "
             "than the synchronised run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Launching N processes does not make training data-parallel. Without "
                 "DistributedDataParallel (or an explicit all-reduce of the gradients) every "
                 "rank steps on the gradient of its own shard only; with per-rank seeds the "
                 "replicas do not even start equal. The job costs N times the compute and "
                 "produces N different models, each trained on 1/N of the data; the checkpoint "
                 "saved by rank 0 is just one of them."),
    buggy="""\
torch.manual_seed(args.seed + rank)            # per-rank seed
model = Net().to(device)                       # never wrapped in DDP
for x, y in shard_loader:                      # DistributedSampler shard
    loss = criterion(model(x), y)
    loss.backward()                            # local gradient only
    optimizer.step(); optimizer.zero_grad()""",
    fixed="""\
torch.manual_seed(args.seed)                   # same seed (DDP also broadcasts rank 0's weights)
model = DDP(Net().to(device), device_ids=[local_rank])
for x, y in shard_loader:
    loss = criterion(model(x), y)
    loss.backward()                            # gradients averaged across ranks
    optimizer.step(); optimizer.zero_grad()""",
    requires=("distributed",),
    # two rank processes per run: planted in the mlp, lstm and resnet, not the transformer
    models=("mlp", "lstm", "resnet", "gpt"),
    patches_only=False,  # it also edits the built run directly
)
