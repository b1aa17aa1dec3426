"""``watchdog``: a step heartbeat — a step that takes far too long, or steps that stop."""

from __future__ import annotations

import bisect
import threading
import time

from bugzoo import Alarm, Detector, Observation, RunView


class Watchdog(Detector):
    """Recipe: the distributed-training watchdog (a collective timeout without waiting for it).

    ``observe`` is the heartbeat. A gap between two heartbeats above ``factor`` x the median gap
    and above ``min_gap_s`` raises ``step_stall``. A background thread raises ``no_heartbeat``
    when no step has been observed for ``timeout_s``; the alarm is delivered at the next step or
    at teardown. If the run truly hangs, the harness' outcome (``hung``) carries the verdict;
    this detector only says when the heartbeat stopped. Category ``distributed`` (ranks waiting
    on each other); timing-based, so it is only as reliable as the machine is quiet.
    """

    def __init__(self, factor: float = 50.0, min_gap_s: float = 5.0, timeout_s: float = 60.0,
                 poll_s: float = 1.0):
        self.factor, self.min_gap_s = factor, min_gap_s
        self.timeout_s, self.poll_s = timeout_s, poll_s

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.gaps: list[float] = []  # kept sorted: the median is read off, not re-sorted
        self.last = time.monotonic()
        self.step, self.fired = 0, False
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="bugzoo-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.wait(self.poll_s):
            with self.lock:
                silent = time.monotonic() - self.last
                if not self.fired and silent > self.timeout_s:
                    self.fired = True
                    self.queue(self.alarm(self.step, "no_heartbeat", "distributed",
                                          f"no training step completed for {silent:.0f} s "
                                          f"after step {self.step - 1}"))

    def observe(self, obs: Observation) -> list[Alarm]:
        now = time.monotonic()
        with self.lock:
            gap, self.last, self.step = now - self.last, now, obs.step + 1
            typical = sorted_median(self.gaps) if len(self.gaps) >= 5 else None
            bisect.insort(self.gaps, gap)
            if (not self.fired and typical is not None and gap > self.min_gap_s
                    and gap > self.factor * typical):
                self.fired = True
                self.queue(self.alarm(obs.step, "step_stall", "distributed",
                                      f"step {obs.step} took {gap:.1f} s, {gap / typical:.0f} x "
                                      "the median step: a rank waiting on a collective?"))
            return self.flush()

    def teardown(self) -> list[Alarm]:
        if hasattr(self, "stop"):
            self.stop.set()
            self.thread.join(timeout=2 * self.poll_s)
        with self.lock:
            return super().teardown()


def sorted_median(values: list[float]) -> float:
    """``statistics.median`` of an already sorted list, without sorting it again."""
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
