"""Submissions that fix nothing, against today's grader (issue 73): each attack is written
first and watched scoring. The grader runs a submission with its own rights, in a process of
its own but unconfined, and counts steps with hooks inside that process. Each attack's test asserts
what a sealed grader must say, and is a strict xfail until the grader is sealed: once it is,
the test passes and the xfail mark must go. The controls pass today, and keep passing: the
checks the attacks get round do work on honest scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bugzoo.teach.tasks.grade import grade
from bugzoo.teach.tasks.make import make_task

SCENARIO = "mlp-double_softmax"  # the fastest task: 200 steps of a small MLP
UNSEALED = "the grader runs submissions unconfined, with step hooks they can reach (issue 73)"

BAYES = '''

class Posterior(nn.Module):
    """Learned nothing: in eval mode, the exact Bayes answer computed from the data source."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        if self.training:
            return self.inner(x)
        near = -((x[:, None, :] - centres[None]) ** 2).sum(-1) / 2
        blob_class = torch.arange(len(centres)) % CLASSES
        return torch.stack([torch.logsumexp(near[:, blob_class == c], -1)
                            for c in range(CLASSES)], -1)


model = Posterior(model)
'''
KEY_READER = '''import runpy
import sys
from pathlib import Path

here = Path(sys.argv[0]).resolve()
key = next(p.parent for p in here.parents[1].glob("*/key.json") if (p.parent / "fixed.py").is_file())
globals().update(runpy.run_path(str(key / "fixed.py"), run_name="__main__"))
'''
HOOKS_CLEARED = '''import torch.optim.optimizer as _optimizer

_optimizer._global_optimizer_pre_hooks.clear()  # the grader's step counter, gone
_optimizer._global_optimizer_post_hooks.clear()
'''


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks")
    make_task(SCENARIO, root / "task", root / "key", eval_seed=7)
    return root


def submit(task: Path, name: str, script: str, category: str = "loss") -> Path:
    submission = task / name
    submission.mkdir()
    (submission / "train.py").write_text(script)
    (submission / "answer.json").write_text(json.dumps({"category": category}))
    return submission


def fixed(task: Path) -> str:
    return (task / "key" / "fixed.py").read_text()


def longer(script: str, steps: int) -> str:
    """``script`` training ``steps`` steps instead of its own."""
    return re.sub(r"^STEPS, ", f"STEPS = {steps}\n_, ", script, count=1, flags=re.M)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=UNSEALED)
def test_a_network_that_learned_nothing_is_not_solved(task):
    """The bug left in training; in eval mode the data source's Bayes posterior."""
    script = (task / "task" / "train.py").read_text() + BAYES
    assert not grade(submit(task, "bayes", script), task / "key").solved


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=UNSEALED)
def test_a_script_that_runs_the_key_is_not_solved(task):
    assert not grade(submit(task, "key_reader", KEY_READER), task / "key").solved


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=UNSEALED)
def test_a_script_that_clears_the_step_hooks_cannot_train_past_the_budget(task):
    script = HOOKS_CLEARED + longer(fixed(task), 1000)
    assert not grade(submit(task, "hooks_cleared", script), task / "key").kept_task


def test_control_the_step_budget_holds_for_a_script_that_leaves_the_hooks(task):
    result = grade(submit(task, "longer", longer(fixed(task), 1000)), task / "key")
    assert not result.kept_task and "steps" in result.why_not_kept


def test_control_the_key_s_own_fix_is_solved(task):
    assert grade(submit(task, "honest", fixed(task)), task / "key").solved
