"""Time budgets for detector calls: a call past its budget is cut off with
:class:`DetectorTimeout`.

A budget rests on the process's one interval timer (SIGALRM), so it works in the main thread of
a POSIX process only; elsewhere a budgeted block runs unbounded. The timer's state lives in one
:class:`AlarmClock` per process, since the timer it stands for is per process too.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class DetectorTimeout(Exception):
    """A detector call ran past its time budget."""


def _usable() -> bool:
    """SIGALRM budgets work only in the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.get_ident() == threading.main_thread().ident


class AlarmClock:
    """The process's interval timer as budgets share it.

    A budgeted call notes its deadline and arms the timer, unless the timer is already due by
    then. When the timer fires, the handler raises only in a call that is past its deadline,
    and re-arms for a call with time left, so each call keeps its whole budget. Inside
    :meth:`scope` the handler stays installed for many calls in a row; the caller disarms the
    timer after a round of calls (:meth:`rest`), so it never fires into the training step."""

    def __init__(self) -> None:
        self.deadline: float | None = None  # when the budgeted call must end (perf_counter)
        self.budget_s = 0.0  # that call's budget, for the message
        self.due = 0.0  # when the armed timer fires (perf_counter); 0.0 while disarmed
        self.scopes = 0  # open scope blocks: while one is, the handler stays installed

    def on_alarm(self, signum, frame) -> None:
        """Raise in a call past its deadline; re-arm for one that has time left; between
        calls, let the timer rest until the next call arms it."""
        self.due = 0.0
        if self.deadline is None:
            return
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise DetectorTimeout(f"exceeded its time budget of {self.budget_s:g} s per call")
        self.arm(left)

    def arm(self, seconds: float) -> None:
        self.due = time.perf_counter() + seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        self.due = 0.0
        signal.setitimer(signal.ITIMER_REAL, 0)

    def rest(self) -> None:
        """Disarm the timer if a call left it armed (after a round of calls)."""
        if self.due:
            self.disarm()

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Keep the handler installed for a block of many budgeted calls (a run's detector
        calls), so that each call costs one timer arming at most instead of installing and
        removing the handler; the timer is disarmed and the previous handler put back at the
        end. A handler that code inside the block installs for itself would receive the
        budgets' alarms."""
        if not _usable():
            yield
            return
        previous = signal.signal(signal.SIGALRM, self.on_alarm)
        self.scopes += 1
        try:
            yield
        finally:
            self.scopes -= 1
            if not self.scopes:
                self.disarm()
            signal.signal(signal.SIGALRM, previous)


CLOCK = AlarmClock()
budget_scope = CLOCK.scope


class TimeBudget:
    """``with TimeBudget(seconds):`` raises :class:`DetectorTimeout` inside the block once
    ``seconds`` have passed; with no budget (``None`` or 0) the block runs unbounded.

    A budget set around a block already under a budget is not nested: the inner one wins for
    its duration. Inside :func:`budget_scope` entering only notes the deadline; outside, the
    handler is installed for the block and removed after. A class rather than a generator: it
    wraps every detector call, and one instance may be entered again and again."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.bounded = bool(seconds and seconds > 0)
        self.armed = False
        self.previous = None

    def __enter__(self) -> None:
        self.armed = self.bounded and _usable()
        if not self.armed:
            return
        self.previous = None if CLOCK.scopes else (signal.signal(signal.SIGALRM,
                                                                 CLOCK.on_alarm),)
        CLOCK.budget_s = self.seconds
        CLOCK.deadline = time.perf_counter() + self.seconds
        if not CLOCK.due or CLOCK.due > CLOCK.deadline:
            CLOCK.arm(self.seconds)

    def __exit__(self, *exc) -> None:
        if self.armed:
            CLOCK.deadline = None
            if self.previous is not None:
                CLOCK.disarm()
                signal.signal(signal.SIGALRM, self.previous[0])
