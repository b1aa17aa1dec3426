"""When a patched script counts as fixed: not worse than the key's fixed script, by a test.

Both scripts train with the same seeds; the grader measures each trained model on fresh data
(:func:`outcome`). Per seed it takes the patched script's shortfall against the fixed one, in
accuracy and in loss, and asks whether the shortfall is below its margin: an exact one-sided
sign-flip test (paired by seed) of "mean shortfall >= margin", rejected at p <= 0.05 for both
measures. With 5 seeds the smallest p is 1/32, so in practice every seed must be within the
margins. The margins are what a practitioner would call the same result on a 4-class problem
(3 accuracy points, 0.1 nats of loss), set before any task was graded.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ACCURACY_MARGIN = 0.03
LOSS_MARGIN = 0.10
ALPHA = 0.05
IGNORE = -100  # a label that is padding (as F.cross_entropy's ignore_index)


@dataclass(frozen=True)
class Outcome:
    """A trained model measured on fresh data (``inf`` loss and 0 accuracy when unusable)."""

    accuracy: float
    loss: float


def outcome(outputs: torch.Tensor | str, labels: torch.Tensor, classes: int) -> Outcome:
    """Accuracy and cross-entropy of ``outputs`` read as class logits, one row per label (for a
    language model, one per target token: ``[B, S, vocabulary]`` against ``[B, S]``, where a
    label of -100 marks padding and does not count); a model that returned no usable outputs
    (an error, the wrong shape) scores 0 and ``inf``."""
    if isinstance(outputs, str) or outputs.shape != (*labels.shape, classes):
        return Outcome(0.0, math.inf)
    real = labels.reshape(-1) != IGNORE
    outputs, labels = outputs.reshape(-1, classes)[real], labels.reshape(-1)[real]
    loss = F.cross_entropy(outputs, labels).item()
    accuracy = (outputs.argmax(-1) == labels).float().mean().item()
    return Outcome(accuracy, loss if math.isfinite(loss) else math.inf)


def sign_flip_p(shortfalls: list[float], margin: float) -> float:
    """Exact one-sided p of "mean shortfall >= margin" against "below it", paired by seed:
    the share of the 2^n sign flips of ``shortfall - margin`` whose mean is at most the
    observed one."""
    centred = [s - margin for s in shortfalls]
    if any(math.isinf(c) or math.isnan(c) for c in centred):
        return 1.0
    observed = sum(centred)
    flips = list(itertools.product((1, -1), repeat=len(centred)))
    return sum(sum(s * c for s, c in zip(signs, centred, strict=True)) <= observed + 1e-12
               for signs in flips) / len(flips)


@dataclass(frozen=True)
class Health:
    """The verdict on a patched script's outcomes against the fixed script's, seed by seed."""

    healthy: bool
    accuracy_p: float
    loss_p: float
    accuracy_shortfall: float  # mean over seeds, fixed minus patched
    loss_excess: float  # mean over seeds, patched minus fixed


def judge(patched: list[Outcome], fixed: list[Outcome]) -> Health:
    """Whether ``patched`` (per seed) is not worse than ``fixed`` beyond the margins."""
    accuracy = [f.accuracy - p.accuracy for p, f in zip(patched, fixed, strict=True)]
    loss = [p.loss - f.loss for p, f in zip(patched, fixed, strict=True)]
    accuracy_p = sign_flip_p(accuracy, ACCURACY_MARGIN)
    loss_p = sign_flip_p(loss, LOSS_MARGIN)
    return Health(within_margins(accuracy_p, loss_p), accuracy_p, loss_p,
                  sum(accuracy) / len(accuracy), sum(loss) / len(loss))


def within_margins(accuracy_p: float, loss_p: float) -> bool:
    """Whether both tests reject "worse by the margin or more"."""
    return accuracy_p <= ALPHA and loss_p <= ALPHA
