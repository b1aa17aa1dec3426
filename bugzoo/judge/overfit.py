"""The single-batch overfit check (Karpathy's recipe; reference exercise E.9.2).

A correctly wired model, loss and optimizer drive the loss on one fixed small batch to near zero.
If it stalls, the fault is in the model, the loss or the optimizer, not in the data pipeline.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from bugzoo.bugs import get_bug
from bugzoo.data import Batch
from bugzoo.train import Trainer


def overfit_single_batch(cfg: DictConfig, steps: int = 300, batch_size: int = 8,
                         lr: float = 3e-3, target: float = 0.05) -> dict:
    """Train a freshly built run (bug planted if ``cfg`` has one) on one fixed batch.

    Dropout stays active (train mode) as in real training. Returns the loss curve, the step at
    which the loss first fell below ``target`` (None if never) and whether it passed.
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
    reached = next((i for i, v in enumerate(losses) if v < target), None)
    return {"losses": losses, "reached_step": reached, "passed": reached is not None,
            "final_loss": losses[-1]}
