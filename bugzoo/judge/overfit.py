"""The single-batch overfit check (Karpathy's recipe; reference exercise E.9.2).

A correctly wired model, loss and optimizer drive the loss on one fixed small batch to near zero.
If it stalls, the fault is in the model, the loss or the optimizer, not in the data pipeline.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import torch
from omegaconf import DictConfig

from bugzoo.bugs import get_bug
from bugzoo.data import Batch
from bugzoo.train import IGNORE, Trainer


def batch_floor(tokens: torch.Tensor, targets: torch.Tensor) -> float:
    """The lowest mean loss a causal model can reach on one fixed next-token batch: rows that
    share a prefix (every row shares ``<bos>``) must share a prediction, so the entropy of the
    targets that follow each distinct prefix is a loss no memorising can remove."""
    followers: dict[tuple, Counter] = defaultdict(Counter)
    for row, position in (targets != IGNORE).nonzero().tolist():
        prefix = tuple(tokens[row, : position + 1].tolist())
        followers[prefix][int(targets[row, position])] += 1
    total = sum(sum(c.values()) for c in followers.values())
    return sum(-n * math.log(n / sum(c.values())) for c in followers.values()
               for n in c.values()) / total


def overfit_single_batch(cfg: DictConfig, steps: int = 300, batch_size: int = 8,
                         lr: float = 3e-3, target: float = 0.05) -> dict:
    """Train a freshly built run (bug planted if ``cfg`` has one) on one fixed batch.

    Dropout stays active (train mode) as in real training. Returns the loss curve, the step at
    which the loss first fell within ``target`` of the batch's floor (0; for a language model
    :func:`batch_floor`), None if never, and whether it passed.
    """
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    trainer = Trainer(cfg, bug).build()
    index = torch.arange(batch_size)
    batch = Batch(trainer.data.train.inputs(index), trainer.data.train.y[index]).to(trainer.device)
    targets = trainer.targets(batch)  # the labels, or a language model's next tokens
    model = trainer.model
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses: list[float] = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model(*batch.inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    floor = batch_floor(batch.inputs[0], targets) if trainer.data.next_token else 0.0
    reached = next((i for i, v in enumerate(losses) if v < floor + target), None)
    return {"losses": losses, "reached_step": reached, "passed": reached is not None,
            "final_loss": losses[-1], "floor": floor}
