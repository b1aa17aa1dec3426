"""``data_checks``: look at the data before and while training — leakage, scaling, labels."""

from __future__ import annotations

import hashlib

import torch
from torch import nn

from bugzoo import Alarm, Detector, Observation, RunView


def row_hashes(x: torch.Tensor) -> set[str]:
    """One digest per row of ``x`` (any shape, first dim = rows)."""
    flat = x.detach().cpu().contiguous().reshape(len(x), -1).numpy()
    return {hashlib.blake2b(row.tobytes(), digest_size=12).hexdigest() for row in flat}


class DataChecks(Detector):
    """Checklist: "inspect the data" (reference notes), done by the tool instead of by eye.

    At setup, from the loaders' splits (``loader.split``; the loaders' generators are untouched):
    train/val overlap by hashing rows (share > ``overlap``), float inputs far from standardised
    (mean beyond ``mean_tol`` or std outside ``std_range``), non-finite inputs, labels out of
    range or a single class. During training, a forward pre-hook on the loss reads each batch's
    targets: ``single_batches`` consecutive single-class batches mean unshuffled, sorted data.
    Category ``data``; each problem alarms once (setup problems at step 0). One overlap is an
    ``eval`` problem instead: validation rows that are exactly the training rows. Leakage
    copies some examples across (a share of the rows, or the validation split added to the
    training data); the same rows on both sides mean the training split itself is evaluated.
    """

    scope = "targeted"  # checks for one known mistake

    def __init__(self, overlap: float = 0.01, mean_tol: float = 0.5,
                 std_range: tuple[float, float] = (0.5, 2.0), single_batches: int = 3):
        self.overlap, self.mean_tol, self.std_range = overlap, mean_tol, tuple(std_range)
        self.single_batches = single_batches

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.single_run, self.fired_batches = 0, 0, False
        for symptom, message in self.audit(run.train_loader.split, run.val_loader.split,
                                           run.num_classes):
            category = "eval" if symptom == "validation_is_training_split" else "data"
            self.queue(self.alarm(0, symptom, category, message))
        if isinstance(run.loss_fn, nn.Module):  # a plain function cannot be hooked
            self.hook(run.loss_fn.register_forward_pre_hook, self._check_batch)

    def audit(self, train, val, num_classes: int) -> list[tuple[str, str]]:
        found = []
        train_rows, val_rows = row_hashes(train.x), row_hashes(val.x)
        shared = len(train_rows & val_rows) / max(1, len(val))
        if train_rows == val_rows:
            found.append(("validation_is_training_split", "the validation rows are exactly the "
                                                          "training rows"))
        elif shared > self.overlap:
            found.append(("train_val_overlap", f"{shared:.1%} of validation rows also appear "
                                               "in the training split"))
        if train.x.is_floating_point():
            x = train.x.detach().float()
            if not bool(torch.isfinite(x).all()):
                found.append(("nonfinite_inputs", "training inputs contain NaN or Inf"))
            else:
                mean, std = float(x.mean()), float(x.std())
                lo, hi = self.std_range
                if abs(mean) > self.mean_tol or not lo <= std <= hi:
                    found.append(("inputs_not_standardized", f"training inputs have mean "
                                                             f"{mean:.3g} and std {std:.3g}"))
        labels = train.y
        if bool((labels < 0).any()) or bool((labels >= num_classes).any()):
            found.append(("labels_out_of_range", f"labels outside [0, {num_classes})"))
        elif len(labels.unique()) < min(2, num_classes):
            found.append(("single_class_split", "the training split holds a single class"))
        return found

    def _check_batch(self, module, inputs) -> None:
        if self.fired_batches or len(inputs) < 2 or not torch.is_grad_enabled():
            return
        target = inputs[1]
        if not isinstance(target, torch.Tensor) or target.dim() != 1 or len(target) < 8:
            return
        single = bool((target == target[0]).all())
        self.single_run = self.single_run + 1 if single else 0
        if self.single_run >= self.single_batches:
            self.fired_batches = True
            self.queue(self.alarm(self.step, "single_class_batches", "data",
                                  f"{self.single_run} consecutive training batches hold a single "
                                  "class: data not shuffled?"))

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        return self.flush()
