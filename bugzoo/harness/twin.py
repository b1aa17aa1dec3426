"""The twin run: a second copy of a run, trained from the same seed with nothing watching,
for the detectors that compare the watched run with it (``Detector.twin_steps``)."""

from __future__ import annotations

import logging
import time

from omegaconf import DictConfig

from bugzoo.bugs import Bug
from bugzoo.harness.budget import DetectorTimeout, TimeBudget
from bugzoo.harness.watch import Watch
from bugzoo.train import Trainer, rng_states_kept

log = logging.getLogger(__name__)


def twin_losses(cfg: DictConfig, bug: Bug | None, steps: int,
                budget_s: float | None = None, armed: bool = True) -> list[float]:
    """Train a fresh copy of the run ``cfg`` describes (same seed, same planted bug) for
    ``steps`` steps with nothing watching; its training losses, fewer if it crashes or runs
    past ``budget_s`` seconds (a run that hangs early must reach the watched run, where the
    watchdog sees it, not hang in its twin). The RNG states are left as they were, so the run
    that follows is not changed by its twin."""
    rows: list[dict] = []
    with rng_states_kept():
        twin = Trainer(cfg, bug, armed=armed)
        try:
            with TimeBudget(budget_s):
                twin.build().fit(rows=rows, steps=min(steps, twin.steps))
        except DetectorTimeout:
            log.warning("twin run cut off after %g s, at %d of %d steps", budget_s, len(rows),
                        steps)
        except Exception as e:  # the watched run will meet the same crash and record it
            log.debug("twin run stopped: %s: %s", type(e).__name__, e)
    return [row["loss"] for row in rows]


def twin_for(watches: list[Watch], cfg: DictConfig, bug: Bug | None,
             armed: bool = True) -> list[float] | None:
    """The twin run's losses for the watching detectors that ask for one, as many steps as the
    most any asks for, under the longest of their time budgets and its time charged to each of
    them; None when none asks."""
    asking = [w for w in watches if w.detector.twin_steps > 0]
    if not asking:
        return None
    budgets = [w.budget_s for w in asking]
    budget_s = None if None in budgets else max(budgets)
    t0 = time.perf_counter()
    losses = twin_losses(cfg, bug, max(w.detector.twin_steps for w in asking), budget_s, armed)
    for w in asking:
        w.seconds += time.perf_counter() - t0
    return losses
