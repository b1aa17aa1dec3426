"""Shared test helpers: quick run configs and a private results folder."""

from __future__ import annotations

import pytest
import torch

from bugzoo.config import compose_run

torch.set_num_threads(1)  # as in the harness' workers: fast for tiny models, reproducible


def quick_cfg(*overrides: str, steps: int = 60):
    """A run config with short settings; later overrides win."""
    return compose_run([f"harness.steps={steps}", "harness.eval_interval=20", *overrides])


@pytest.fixture
def results_dir(tmp_path):
    return tmp_path / "results"
