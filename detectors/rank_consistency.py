"""``rank_consistency``: data-parallel replicas that stop being copies of each other."""

from __future__ import annotations

import torch
import torch.distributed as dist

from bugzoo import Alarm, Detector, Observation, RunView


class RankConsistency(Detector):
    """Recipe: compare the replicas across ranks (the reference notes' ``check_loss_equal``,
    applied to the weights).

    Data-parallel replicas hold identical parameters after every step: DistributedDataParallel
    broadcasts rank 0's weights when it wraps the model and hands every rank the same averaged
    gradient, so every rank applies the same update. Every ``every`` steps, from step 0, each rank
    all-gathers a checksum of its parameters (their sum and sum of squares, in float64); a rank
    whose checksum differs from rank 0's by more than ``rel_tol`` (relative) raises a
    ``distributed`` alarm that names it. Identical replicas give bitwise-identical checksums;
    the tolerance only absorbs float64 rounding. Runs on every rank (``all_ranks``), since a
    collective needs all of them; it does nothing in a single-process run.
    """

    scope = "targeted"  # checks for one known mistake

    all_ranks = True

    def __init__(self, every: int = 10, rel_tol: float = 1e-9):
        self.every, self.rel_tol = every, rel_tol

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.active = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.fired = False

    def checksums(self) -> torch.Tensor:
        """[world_size, 2]: every rank's sum and sum of squares of its parameters."""
        params = [p.detach().double() for p in self.run.model.parameters()]
        device = params[0].device
        mine = torch.stack([sum(p.sum() for p in params), sum((p * p).sum() for p in params)])
        gathered = [torch.empty(2, dtype=torch.float64, device=device)
                    for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, mine)
        return torch.stack(gathered).cpu()

    def observe(self, obs: Observation) -> list[Alarm]:
        if not self.active or self.fired or obs.step % self.every:
            return []
        sums = self.checksums()
        scale = sums[0].abs().clamp_min(1e-12)
        off = ((sums - sums[0]).abs() / scale).amax(dim=1)
        apart = [rank for rank in range(len(sums)) if off[rank] > self.rel_tol]
        if not apart:
            return []
        self.fired = True
        return [self.alarm(obs.step, "ranks_diverged", "distributed",
                           f"after step {obs.step} the parameters of rank(s) {apart} differ "
                           f"from rank 0's (relative checksum difference up to "
                           f"{float(off.max()):.2e}): the replicas are not in sync")]
