"""``memory_growth``: memory that a training step allocates and never gives back."""

from __future__ import annotations

import statistics

from bugzoo import Alarm, Detector, Observation, RunView


class MemoryGrowth(Detector):
    """Recipe: OOM forensics — "memory growing over time means a leak" (reference notes).

    A leak is memory that *every* step allocates and keeps: the live heap (malloc in use; see
    ``bugzoo.telemetry.heap_mb``) or the CUDA memory in use then rises step after step by about
    the same amount, without the plateaus of a cache filling up or the drops of memory being
    freed. Over the last ``window`` steps this detector asks for both:

    * the memory rose on at least ``rising_share`` of the steps (a steady climb, not a few jumps
      from a cache or an allocator growing its arena);
    * the median rise per step is at least ``min_step_kib`` KiB. Keeping Python scalars per step
      (a logged float, a dict of metrics) costs well under 1 KiB; keeping a tensor, and with it
      its autograd graph, costs at least a page (4 KiB) of storage and graph nodes.

    A leak present from the first step is caught after ``window`` steps. Category ``memory``.
    """

    observation_only = True

    def __init__(self, window: int = 20, rising_share: float = 0.9, min_step_kib: float = 4.0):
        self.window, self.rising_share, self.min_step_kib = window, rising_share, min_step_kib

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.series: dict[str, list[float]] = {"heap": [], "cuda": []}
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired:
            return []
        for kind, value in (("heap", obs.heap_mb), ("cuda", obs.cuda_mb)):
            series = self.series[kind]
            series.append(value)
            if len(series) <= self.window:
                continue
            recent = series[-self.window - 1:]
            rises = [(b - a) * 1024 for a, b in zip(recent, recent[1:], strict=False)]
            rising = sum(r > 0 for r in rises) / len(rises)
            per_step = statistics.median(rises)
            if rising >= self.rising_share and per_step >= self.min_step_kib:
                self.fired = True
                return [self.alarm(obs.step, "memory_growth", "memory",
                                   f"{kind} memory rose on {rising:.0%} of the last "
                                   f"{self.window} steps, by a median {per_step:.0f} KiB a "
                                   f"step (now {value:.0f} MiB)")]
        return []
