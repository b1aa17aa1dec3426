"""Runs of task scripts kept on disk, so that each distinct run trains once.

A run of a task script is a pure function of the script's text and its seed (a graded run, also
of the fresh inputs its model is measured on), given the torch and the bugzoo that ran it. So
the grader, ``bugzoo task make`` (a task's report), ``task validate``, ``task set`` and ``task
agents`` keep what each run left under a key made of those, and a rebuilt task set or a rerun
board trains only what changed.

The cache is the folder ``task-runs`` of ``$BUGZOO_CACHE`` (:func:`bugzoo.paths.cache_folder`,
default ``~/.cache/bugzoo``), one subfolder per bugzoo version; delete it at will, and
``BUGZOO_CACHE=off`` turns it off. An entry holds plain values and tensors only and is read
back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import torch

from bugzoo.paths import cache_folder


def folder() -> Path | None:
    """This bugzoo's folder of kept runs, or ``None`` when the cache is off."""
    return cache_folder("task-runs")


def key(*parts: str | torch.Tensor) -> str:
    """A run's key: the digest of what it depends on (texts and tensors), and of the torch that
    runs it."""
    digest = hashlib.sha256(torch.__version__.encode() + b"\0")
    for part in parts:
        if isinstance(part, torch.Tensor):
            digest.update(f"{part.dtype}{tuple(part.shape)}".encode())
            digest.update(part.contiguous().numpy().tobytes())
        else:
            digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def load(name: str) -> dict | None:
    """The kept run ``name``, or ``None`` when there is none (or it cannot be read)."""
    if (where := folder()) is None:
        return None
    try:
        return torch.load(where / f"{name}.pt", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError):
        return None


def save(name: str, value: dict) -> None:
    """Keep ``value`` (plain values and tensors) as run ``name``; a cache that cannot be written
    is skipped."""
    if (where := folder()) is None:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        partial = where / f"{name}.{os.getpid()}.partial"
        torch.save(value, partial)
        partial.replace(where / f"{name}.pt")
    except OSError:
        return
