"""Shared test helpers: quick run configs and a private results folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from bugzoo.config import compose_run

torch.set_num_threads(1)  # as in the harness' workers: fast for tiny models, reproducible


def quick_cfg(*overrides: str, steps: int = 60):
    """A run config with short settings; later overrides win."""
    return compose_run([f"harness.steps={steps}", "harness.eval_interval=20", *overrides])


def readme_examples(section: str, language: str) -> list[str]:
    """The ``language`` code blocks of README's ``### <section>``, in order (tests run them)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    body = re.search(rf"^### {re.escape(section)}\n(.*?)(?=^##)", readme, re.S | re.M)
    assert body, f"README lost its section {section!r}"
    return re.findall(rf"```{language}\n(.*?)```", body.group(1), re.S)


@pytest.fixture
def results_dir(tmp_path):
    return tmp_path / "results"
