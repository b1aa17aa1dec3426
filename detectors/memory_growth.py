"""``memory_growth``: host (or device) memory that keeps growing step after step."""

from __future__ import annotations

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation


class MemoryGrowth(Detector):
    """Recipe: OOM forensics — "memory growing over time means a leak" (reference notes).

    After ``warmup`` steps (allocator and caches settle), the live heap (malloc in use; see
    ``bugzoo.telemetry.heap_mb``) and CUDA memory in use are watched: growth above ``total_mb`` since the warm-up *and* above ``window_mb``
    within the last ``window`` steps (still rising, not a one-off plateau) raises a ``memory``
    alarm.
    """

    observation_only = True

    def __init__(self, warmup: int = 20, window: int = 50, total_mb: float = 48.0,
                 window_mb: float = 16.0):
        self.warmup, self.window = warmup, window
        self.total_mb, self.window_mb = total_mb, window_mb

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.series: dict[str, list[float]] = {"heap": [], "cuda": []}
        self.fired = False

    def observe(self, obs: Observation) -> list[Alarm]:
        if self.fired or obs.step < self.warmup:
            return []
        for kind, value in (("heap", obs.heap_mb), ("cuda", obs.cuda_mb)):
            series = self.series[kind]
            series.append(value)
            total = series[-1] - series[0]
            recent = series[-1] - series[max(0, len(series) - self.window)]
            if total > self.total_mb and recent > self.window_mb:
                self.fired = True
                return [self.alarm(obs.step, "memory_growth", "memory",
                                   f"{kind} memory grew {total:.0f} MB since step {self.warmup}, "
                                   f"{recent:.0f} MB in the last {self.window} steps")]
        return []
