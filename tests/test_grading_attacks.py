"""Submissions that fix nothing, against the sealed grader (issue 73), each written first and
watched scoring against the grader it replaced (which ran submissions unconfined, in a process
of its own, and counted steps only with hooks inside it: the key reader was SOLVED and the hook
clearer kept the task). Each attack's test asserts what a sealed grader must say; the one it
does not yet say is a strict xfail. The controls keep passing: the checks the attacks get round
do work on honest scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bugzoo.harness import sandbox
from bugzoo.teach.tasks.grade import grade
from bugzoo.teach.tasks.make import make_task

SCENARIO = "mlp-double_softmax"  # the fastest task: 200 steps of a small MLP
SAME_SOURCE = ("the grader measures the model on fresh points of the script's own data source, "
               "which the script holds: fresh generator parameters served by the grader change "
               "the task contract (issue 73, build item 2)")
needs_namespaces = pytest.mark.skipif(sandbox.confinement() != sandbox.NAMESPACES,
                                      reason="user namespaces are not allowed here")

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
TEMPLATE_READER = '''from bugzoo.teach.export import render  # bugzoo's own clean template, to diff

print(render("mlp-double_softmax")["fixed"])
'''
OFF_THE_BOOKS = '''import os
import time

if os.fork() == 0:  # trains the longer run in a process of its own, never waited for
    import torch
    torch.save({"done": 1}, "weights.pt")
    x = torch.randn(256, 256)
    for _ in range(1500):
        x = torch.tanh(x @ x) / 16
    os.replace("weights.pt", "trained.pt")
    os._exit(0)
while not os.path.exists("trained.pt"):
    time.sleep(0.05)
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


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=SAME_SOURCE)
def test_a_network_that_learned_nothing_is_not_solved(task):
    """The bug left in training; in eval mode the data source's Bayes posterior."""
    script = (task / "task" / "train.py").read_text() + BAYES
    assert not grade(submit(task, "bayes", script), task / "key").solved


@needs_namespaces
def test_a_script_that_runs_the_key_is_not_solved(task):
    result = grade(submit(task, "key_reader", KEY_READER), task / "key")
    assert not result.solved and "StopIteration" in result.why_not_kept  # no key.json in sight
    assert result.sandbox == sandbox.NAMESPACES


@needs_namespaces
def test_a_script_cannot_import_bugzoo_to_diff_against_its_templates(task):
    result = grade(submit(task, "template_reader", TEMPLATE_READER + fixed(task)), task / "key")
    assert not result.kept_task and "No module named 'bugzoo" in result.why_not_kept


def test_a_script_that_clears_the_step_hooks_cannot_train_past_the_budget(task):
    script = HOOKS_CLEARED + longer(fixed(task), 1000)
    result = grade(submit(task, "hooks_cleared", script), task / "key")
    assert not result.kept_task and "CPU-s" in result.why_not_kept


@needs_namespaces
def test_cpu_spent_in_a_process_the_script_never_waits_for_counts(task):
    """The kernel adds an orphan's CPU time to the server that reaps it, so it still counts."""
    result = grade(submit(task, "off_the_books", OFF_THE_BOOKS + fixed(task)), task / "key")
    assert not result.kept_task and "CPU-s" in result.why_not_kept


def test_control_the_step_budget_holds_for_a_script_that_leaves_the_hooks(task):
    result = grade(submit(task, "longer", longer(fixed(task), 1000)), task / "key")
    assert not result.kept_task and "steps" in result.why_not_kept


def test_control_the_key_s_own_fix_is_solved_within_its_budget(task):
    result = grade(submit(task, "honest", fixed(task)), task / "key")
    assert result.solved and result.sandbox == sandbox.confinement()


@pytest.fixture(scope="module")
def task_set(tmp_path_factory):
    """A one-task set, laid out as ``bugzoo task set`` lays one out (keys beside tasks)."""
    root = tmp_path_factory.mktemp("cheats")
    make_task(SCENARIO, root / "tasks" / "task-01", root / "keys" / "task-01", eval_seed=7)
    return root


@needs_namespaces
@pytest.mark.parametrize("cheat", ["key_reader", "template_reader"])
def test_the_cheating_solvers_score_unconfined_and_not_sealed(cheat, task_set, monkeypatch):
    """Each cheat is SOLVED where the runs are not confined (watched scoring), and not sealed.
    (The unconfined grade gets grading servers of its own: a process's confinement never
    changes, so its servers are shared by the folders they hide alone.)"""
    from bugzoo.teach.tasks import sealed_runs
    from bugzoo.teach.tasks.solvers import SOLVERS

    task, key = task_set / "tasks" / "task-01", task_set / "keys" / "task-01"
    sealed = grade(SOLVERS[cheat](task, key, task_set / "sealed" / cheat), key)
    assert not sealed.solved and sealed.sandbox == sandbox.NAMESPACES
    monkeypatch.setattr(sandbox, "confinement", lambda: sandbox.UNCONFINED)
    monkeypatch.setattr(sealed_runs, "_shared", {})
    loose = grade(SOLVERS[cheat](task, key, task_set / "loose" / cheat), key)
    assert loose.sandbox == sandbox.UNCONFINED and "UNCONFINED" in loose.line()
    if cheat == "key_reader":
        assert loose.solved
    else:  # it reads the template and trains the fixed script: solved, or, where importing
        # bugzoo alone costs more than the mlp's CPU budget (it did in a well-stocked
        # environment, not in a fresh one), over the budget; never stopped at the import
        assert "No module named" not in loose.why_not_kept
        assert loose.solved or "CPU-s" in loose.why_not_kept
        assert loose.accuracy == loose.fixed_accuracy
